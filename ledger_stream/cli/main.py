"""Entry point of the ``ledger-stream`` command.

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``handler``. Flags fall back to ``LEDGER_*`` environment variables (shown
in ``--help``) through :class:`ledger_stream.config.Settings`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ledger_stream.cli import (
    alerts_cmd,
    api_cmd,
    bench_cmd,
    chaos_cmd,
    connector_cmd,
    demo_cmd,
    falsify_cmd,
    freeze_cmd,
    fuzz_cmd,
    inspect_cmd,
    kafka_cmd,
    mcp_cmd,
    processor_cmd,
    receipts_cmd,
    reconcile_cmd,
    sandbox_cmd,
    simulate_cmd,
    topics_cmd,
    upgrade_cmd,
    view_cmd,
    watch_cmd,
)
from ledger_stream.cli.common import CliError, printable
from ledger_stream.logs import configure_logging

COMMANDS = (
    kafka_cmd, topics_cmd, processor_cmd, connector_cmd, view_cmd, receipts_cmd, alerts_cmd,
    inspect_cmd, reconcile_cmd, freeze_cmd,
    sandbox_cmd, demo_cmd, falsify_cmd, bench_cmd, simulate_cmd, fuzz_cmd, chaos_cmd, mcp_cmd,
    api_cmd, watch_cmd, upgrade_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ledger-stream",
        description="Effectively-once side effects for AI agents, on Kafka.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # the flag's level; the command's settings may then apply LEDGER_LOG_LEVEL or a file
        configure_logging(getattr(args, "log_level", None))
    except ValueError as exc:
        parser.error(str(exc))
    try:
        return int(args.handler(args) or 0)
    except CliError as exc:
        # Errors quote keys, details and names read from the topics: shown, never acted on.
        print(f"ledger-stream: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
