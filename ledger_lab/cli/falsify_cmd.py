"""``ledger-stream falsify``: run the falsification matrix and print the release gate.

Starts a local Kafka for the run unless LEDGER_KAFKA_BOOTSTRAP (or --bootstrap) names one,
and a throwaway PostgreSQL for the PostgresSaver cases unless --postgres-dsn names one.
Every case gets its own topics, processor, connector, payments sandbox and checkpoint
database. Prints progress to stderr, then the gate JSON and the table to stdout; exit
status 0 when the gate passes, 1 when it fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ledger_stream.cli.common import CliError, add_common_flags, settings_from
from ledger_stream.kafka.exceptions import KafkaSetupError

WORKER = Path("examples") / "refund_agent" / "worker.py"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "falsify",
        help="run the falsification matrix (real agents, real SIGKILLs) and the release gate",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--scenarios", metavar="N,N,...",
        default=os.environ.get("LEDGER_FALSIFY_SCENARIOS"),
        help="scenario numbers to run, e.g. 1,2,5 (env: LEDGER_FALSIFY_SCENARIOS; "
        "default all)")
    parser.add_argument(
        "--quick", action="store_true",
        help="only a fast subset (SQLite saver, durability sync); `make test` runs them all")
    parser.add_argument(
        "--savers", metavar="NAME,...", default=os.environ.get("LEDGER_FALSIFY_SAVERS",
                                                              "sqlite,postgres"),
        help="checkpoint savers for scenario 5 (env: LEDGER_FALSIFY_SAVERS; "
        "default sqlite,postgres)")
    parser.add_argument(
        "--postgres-dsn", metavar="DSN", default=os.environ.get("LEDGER_FALSIFY_POSTGRES_DSN"),
        help="PostgreSQL server for the PostgresSaver cases, a database is created per case "
        "(env: LEDGER_FALSIFY_POSTGRES_DSN; default: start a throwaway server)")
    parser.add_argument(
        "--agent", choices=("tool", "middleware"),
        default=os.environ.get("LEDGER_FALSIFY_AGENT", "tool"),
        help="the agent that runs the scenarios: the LangGraph agent on ledger_tool, or the "
        "LangChain create_agent agent on LedgerMiddleware (env: LEDGER_FALSIFY_AGENT; "
        "default tool)")
    parser.add_argument("--list", action="store_true",
                        help="print the selected cases and what each expects, run nothing")
    parser.add_argument("--out", metavar="FILE",
                        help="also write the gate and every run's evidence as JSON here")
    parser.add_argument("--workdir", metavar="DIR",
                        help="keep the cases' logs and databases here (default: a temporary "
                        "folder, kept only when the gate fails)")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _numbers(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise CliError(f"--scenarios takes numbers like 1,2,5, not {text!r}") from exc
    from ledger_lab.falsify.matrix import CASES

    last = max(c.number for c in CASES)
    unknown = sorted(set(numbers) - set(range(1, last + 1)))
    if unknown:
        raise CliError(f"no such scenarios: {unknown} (the matrix has 1 to {last})")
    return numbers


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    if args.agent not in ("tool", "middleware"):
        raise CliError(f"--agent (LEDGER_FALSIFY_AGENT) must be tool or middleware, not "
                       f"{args.agent!r}")
    if args.list:
        return _list(args)
    root = Path.cwd()
    if not (root / WORKER).exists():
        raise CliError(f"{WORKER} not found in {root}: the matrix runs the example agent, so "
                       "run `ledger-stream falsify` from the root of a source checkout")
    from ledger_lab import falsify
    from ledger_lab.local_kafka.ephemeral import kafka_for

    cases = falsify.select(_numbers(args.scenarios), args.quick, _savers(args.savers),
                           args.agent)
    if not cases:
        raise CliError("no case matches the selection")
    settings = settings_from(args)
    started = time.monotonic()
    with ExitStack() as stack:
        try:
            bootstrap, _ = stack.enter_context(kafka_for(settings, _say))
        except KafkaSetupError as exc:
            raise CliError(str(exc)) from exc
        base = settings.model_copy(update={"kafka_bootstrap": bootstrap, "partitions": 3})
        workdir = Path(args.workdir) if args.workdir else Path(
            tempfile.mkdtemp(prefix="ledger-falsify-"))
        workdir.mkdir(parents=True, exist_ok=True)
        databases = None
        if any(c.saver == "postgres" for c in cases):
            databases = stack.enter_context(_postgres(args.postgres_dsn))
        _say(f"running {len(cases)} cases; logs in {workdir}")
        results = falsify.run_matrix(cases, base, workdir, database_for=databases,
                                     root=root, say=_say)
    gate = falsify.release_gate(results)
    passed = falsify.gate_passed(gate)
    seconds = time.monotonic() - started
    print(json.dumps(gate, indent=2), flush=True)
    print(falsify.table(results))
    print(f"\nrelease gate {'PASSED' if passed else 'FAILED'}: {len(results)} runs of "
          f"{len(cases)} cases in {seconds:.0f}s", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(
            falsify.document(gate, passed, results, seconds), indent=2) + "\n")
    if passed and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not passed:
        _say(f"logs and databases kept in {workdir}")
    return 0 if passed else 1


def _list(args: argparse.Namespace) -> int:
    from ledger_lab.falsify import select

    for case in select(_numbers(args.scenarios), args.quick, _savers(args.savers),
                       args.agent):
        bypass = "ledger + bypassed" if case.bypass else "ledger only"
        print(f"{case.label:34} {case.title} [{bypass}]\n{'':34} expect: {case.expectation}")
    return 0


def _savers(text: str) -> list[str]:
    from ledger_lab.falsify.matrix import SAVERS

    savers = [s.strip() for s in text.split(",") if s.strip()]
    if not savers or not set(savers) <= set(SAVERS):
        raise CliError(f"--savers takes sqlite and/or postgres, not {text!r}")
    return savers


@contextmanager
def _postgres(dsn: str | None) -> Iterator[Callable[[Any], str] | None]:
    """A function giving each case a fresh database, or None when no server can be had
    (the PostgresSaver cases then fail, with the reason)."""
    from ledger_lab.harness.postgres import PostgresServer, PostgresUnavailable

    if dsn:
        yield lambda _case: _database_on(dsn)
        return
    try:
        server = PostgresServer().start()
    except PostgresUnavailable as exc:
        _say(f"no PostgreSQL for the PostgresSaver cases: {exc}")
        yield None
        return
    _say(f"PostgreSQL on port {server.port}")
    try:
        yield lambda _case: server.new_database()
    finally:
        server.remove()


def _database_on(dsn: str) -> str:
    import uuid

    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = f"falsify_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(dsn, dbname=name)
