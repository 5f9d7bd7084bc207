"""``ledger-stream upgrade-check``: resume every in-flight thread against a new graph in a
dry run, and say per thread whether deploying it is safe (ledger_stream/upgrade/)."""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ledger_stream.cli.common import CliError, add_common_flags, settings_from


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "upgrade-check", help="before deploying a new graph version: what it would do to "
        "the threads in flight",
        description="Resume every in-flight thread of the checkpointer (a pending step or "
        "a waiting interrupt) against the new graph, in a dry run: the thread's newest "
        "checkpoint is copied into memory (the checkpointer is opened read-only where it "
        "can be, and never written), and every intent the new code submits is answered by "
        "the ledger's decision core on the key's state as the ledger holds it, never "
        "produced. Per thread: safe, new_effect, conflict, rejected, held, orphan, "
        "dropped_task, error, waiting. The graph's nodes run for real in this process "
        "(models are called; only effects through the ledger are held back). Exit status 1 "
        "when any thread is unsafe (conflict, rejected, orphan, dropped_task, error).")
    parser.add_argument("--graph", required=True, metavar="MODULE:ATTR",
                        help="the new graph: a compiled graph, or a function of no "
                        "arguments that returns one")
    parser.add_argument("--checkpointer", required=True, metavar="DSN",
                        help="the threads' checkpointer: a SQLite file (or sqlite:///FILE), "
                        "or PostgreSQL (postgresql://... or 'host=... user=...')")
    parser.add_argument("--threads", nargs="+", metavar="THREAD", default=(),
                        help="check these threads only (default: every thread in flight)")
    parser.add_argument("--resume", metavar="MODULE:ATTR",
                        help="f(thread_id, interrupt_value) -> the answer a human would "
                        "give, to check past interrupts (default: stop at them)")
    parser.add_argument("--group", metavar="NAME", help="the processor's consumer group, "
                        "whose lag the check waits out (env: LEDGER_CONSUMER_GROUP)")
    parser.add_argument("--lag-wait", type=float, default=30.0, metavar="S",
                        help="seconds to wait for the processor to decide every recorded "
                        "intent before reading key states (default 30)")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def load_object(spec: str, flag: str) -> Any:
    """The object MODULE:ATTR names (the current folder importable, as uvicorn does)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CliError(f"{flag} {spec!r}: expected MODULE:ATTR")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises on import
        raise CliError(f"{flag} {spec!r}: cannot import {module_name}: "
                       f"{type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(found, part):
            raise CliError(f"{flag} {spec!r}: {module_name} has no {attr}")
        found = getattr(found, part)
    return found


def _graph(spec: str) -> Any:
    from langgraph.pregel import Pregel

    found = load_object(spec, "--graph")
    if not isinstance(found, Pregel) and callable(found):
        try:
            found = found()
        except Exception as exc:
            raise CliError(f"--graph {spec!r}: calling it (with no arguments) failed: "
                           f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(found, Pregel):
        raise CliError(f"--graph {spec!r} is not a compiled LangGraph graph "
                       f"({type(found).__name__})")
    return found


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
        raise CliError(f"--checkpointer: not a PostgreSQL connection string: {exc}") from exc
    options = f"{params.get('options') or ''} -c default_transaction_read_only=on".strip()
    return make_conninfo(dsn, options=options)


@contextmanager
def open_checkpointer(dsn: str) -> Iterator[Any]:
    """The checkpointer ``dsn`` names, read-only: SQLite opened so, PostgreSQL in read-only
    transactions (never set up or migrated)."""
    postgres = postgres_dsn(dsn)
    if postgres is not None:
        from langgraph.checkpoint.postgres import PostgresSaver

        try:
            with PostgresSaver.from_conn_string(postgres) as saver:
                yield saver
        except Exception as exc:  # psycopg's errors name the problem
            if type(exc).__module__.startswith("psycopg"):
                raise CliError(f"--checkpointer: {type(exc).__name__}: {exc}") from exc
            raise
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(dsn.removeprefix("sqlite:///").removeprefix("sqlite://"))
    if not path.is_file():
        raise CliError(f"--checkpointer {dsn!r}: no such SQLite file")
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True,
                           check_same_thread=False)
    try:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"checkpoints", "writes"} <= tables:
            raise CliError(f"--checkpointer {dsn!r}: not a LangGraph SQLite checkpointer "
                           "(no checkpoints and writes tables)")
        yield SqliteSaver(conn)
    except sqlite3.Error as exc:
        raise CliError(f"--checkpointer {dsn!r}: {exc}") from exc
    finally:
        conn.close()


def _run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError, kafka_error_text
    from ledger_stream.kafka.producer import forbid_producing
    from ledger_stream.processor.policy import ConfigError, policy_from
    from ledger_stream.serde import make_codec
    from ledger_stream.upgrade import KafkaLedger, check_threads
    from ledger_stream.upgrade.check import LedgerBehind
    from ledger_stream.upgrade.report import as_json, as_table

    settings = settings_from(args, consumer_group=args.group)
    # Before the graph's module is imported: nothing of this process writes to the ledger,
    # even code that runs outside the dry run's context (a thread a tool starts itself).
    forbid_producing("upgrade-check is a dry run")
    try:
        policy = policy_from(settings)
    except ConfigError as exc:
        raise CliError(f"{exc} (the check decides as the processor would)") from exc
    graph = _graph(args.graph)
    resume = load_object(args.resume, "--resume") if args.resume else None
    if resume is not None and not callable(resume):
        raise CliError(f"--resume {args.resume!r} is not callable")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with open_checkpointer(args.checkpointer) as saver:
        try:
            ledger = KafkaLedger(settings, resolve_bootstrap(settings),
                                 make_codec(settings.connection.schema_registry_url), progress)
            verdicts = check_threads(graph, saver, ledger, policy, threads=args.threads,
                                     resume=resume, lag_wait_s=args.lag_wait,
                                     progress=progress)
        except (LookupError, LedgerBehind, KafkaSetupError) as exc:
            raise CliError(str(exc)) from exc
        except KafkaException as exc:
            raise CliError(f"cannot read the ledger: {kafka_error_text(exc)}") from exc
        except sqlite3.Error as exc:
            raise CliError(f"--checkpointer: {exc}") from exc
    print(as_json(verdicts) if args.json else as_table(verdicts))
    return 1 if any(v.unsafe for v in verdicts) else 0
