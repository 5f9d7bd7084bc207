"""A LangGraph checkpointer opened read-only, for the commands that read threads and must
never change them (``upgrade-check``, ``replay-plan``, ``evidence --checkpointer``).

Guarantee: SQLite is opened with ``mode=ro`` (a write raises); PostgreSQL runs every
transaction with ``default_transaction_read_only=on`` and is never set up or migrated.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ledger_stream.cli.common import CliError, shown

DSN_HELP = ("a SQLite file (or sqlite:///FILE), or PostgreSQL (postgresql://... or "
            "'host=... user=...'), opened read-only")


def postgres_dsn(dsn: str) -> str | None:
    """``dsn`` as a read-only libpq connection string when it names PostgreSQL (a
    ``postgres*://`` URL, SQLAlchemy's ``postgresql+psycopg://`` included, or
    ``key=value`` pairs), else None."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    scheme, sep, rest = dsn.partition("://")
    if sep and scheme.split("+", 1)[0] in ("postgres", "postgresql"):
        dsn = f"postgresql://{rest}"
    elif not (("=" in dsn) and not Path(dsn).exists()):
        return None
    try:
        params = conninfo_to_dict(dsn)
    except Exception as exc:  # psycopg.ProgrammingError: what is wrong with it
        # psycopg's message quotes the string, password included
        raise CliError("--checkpointer: not a PostgreSQL connection string: "
                       f"{shown(dsn)}") from exc
    options = f"{params.get('options') or ''} -c default_transaction_read_only=on".strip()
    return make_conninfo(dsn, options=options)


@contextmanager
def open_checkpointer(dsn: str) -> Iterator[Any]:
    """The checkpointer ``dsn`` names, read-only: SQLite opened so, PostgreSQL in read-only
    transactions (never set up or migrated). Any error opening or reading it is a
    CliError naming --checkpointer."""
    postgres = postgres_dsn(dsn)
    if postgres is not None:
        from langgraph.checkpoint.postgres import PostgresSaver

        try:
            with PostgresSaver.from_conn_string(postgres) as saver:
                yield saver
        except Exception as exc:  # psycopg's errors name the problem, the DSN too at times
            if type(exc).__module__.startswith("psycopg"):
                from connectors.postgres import describe

                raise CliError(f"--checkpointer {shown(dsn)}: {describe(exc)}") from exc
            raise
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(dsn.removeprefix("sqlite:///").removeprefix("sqlite://"))
    if not path.is_file():
        raise CliError(f"--checkpointer {shown(dsn)}: no such SQLite file")
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True,
                           check_same_thread=False)
    try:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"checkpoints", "writes"} <= tables:
            raise CliError(f"--checkpointer {shown(dsn)}: not a LangGraph SQLite checkpointer "
                           "(no checkpoints and writes tables)")
        yield SqliteSaver(conn)
    except sqlite3.Error as exc:
        raise CliError(f"--checkpointer {shown(dsn)}: {exc}") from exc
    finally:
        conn.close()
