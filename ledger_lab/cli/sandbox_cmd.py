"""``ledger-stream sandbox``: run the payments sandbox (the reference target) until SIGTERM."""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence

from ledger_lab.sandbox.faults import Fault, InvalidFault
from ledger_stream.cli.common import CliError
from ledger_stream.logs import configure_logging


def _fault(spec: str) -> Fault:
    try:
        return Fault.from_spec(spec)
    except InvalidFault as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _latency(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of milliseconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The sandbox is a test fixture, not part of Settings: its two environment fallbacks
    # are read here, as argparse defaults.
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)"
    )
    parser.add_argument(
        "--port", type=int, default=os.environ.get("LEDGER_SANDBOX_PORT", "0"),
        help="port to listen on, 0 picks a free one (env: LEDGER_SANDBOX_PORT; default 0)",
    )
    parser.add_argument(
        "--db", metavar="PATH", default=os.environ.get("LEDGER_SANDBOX_DB", "sandbox.db"),
        help="SQLite file of effects and requests, created if absent "
        "(env: LEDGER_SANDBOX_DB; default ./sandbox.db)",
    )
    parser.add_argument(
        "--fault", metavar="MODE[:TIMES[:DELAY_S]]", type=_fault, action="append", default=[],
        help="arm a fault at start-up, for any new key (repeatable). Modes: commit_then_drop, "
        "delay_before_commit, error_before_commit, decline (402), crash_before_commit (exit 70), "
        "crash_after_commit (exit 71)",
    )
    parser.add_argument(
        "--latency-ms", metavar="MS", type=_latency, default=0,
        help="time every payment request takes before it is handled, as a real API's does "
        "(default 0)",
    )
    parser.add_argument(
        "--log-level", metavar="LEVEL",
        default=os.environ.get("LEDGER_LOG_LEVEL"),
        help="DEBUG, INFO, WARNING (env: LEDGER_LOG_LEVEL)",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sandbox",
        help="run the payments sandbox, a reference target that deduplicates by key",
        description="Serve a Stripe-like payments API on HTTP (POST /v1/payments with an "
        "Idempotency-Key; GET /v1/payments/by-key/KEY; GET /v1/ledger; /v1/faults) backed by "
        "a SQLite file. Prints 'sandbox listening on URL' once it accepts connections; runs "
        "until SIGTERM or Ctrl-C, then stops cleanly (exit 0).",
    )
    add_arguments(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ledger_lab.sandbox.server import run_sandbox

    def announce(line: str) -> None:
        print(line, flush=True)

    try:
        return run_sandbox(args.host, args.port, args.db, tuple(args.fault), announce,
                           latency_s=args.latency_ms / 1000)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    except sqlite3.Error as exc:
        raise CliError(f"cannot open the sandbox database {args.db}: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ledger_lab.sandbox``: this command without the ``ledger-stream`` CLI."""
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.sandbox")
    add_arguments(parser)
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        return _run(args)
    except CliError as exc:
        print(f"ledger-stream sandbox: error: {exc}", file=sys.stderr)
        return 2
