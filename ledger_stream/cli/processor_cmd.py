"""``ledger-stream processor``: run the single writer per operation key until SIGTERM."""

from __future__ import annotations

import argparse

from ledger_stream.cli.common import CliError, add_common_flags, settings_from
from ledger_stream.kafka.exceptions import KafkaSetupError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "processor",
        help="run the ledger processor (intents + attempts -> receipts, dispatch, alerts)",
        description="Consume ledger.intents and ledger.attempts, decide per operation key "
        "with RocksDB state, and produce receipts, dispatches, alerts and DLQ records. "
        "Runs until SIGTERM or Ctrl-C, then commits and stops cleanly.",
    )
    parser.add_argument(
        "--guarantee", choices=("at-least-once", "exactly-once"),
        help="processing guarantee (env: LEDGER_PROCESSING_GUARANTEE; default at-least-once)",
    )
    parser.add_argument(
        "--group", metavar="NAME", help="consumer group (env: LEDGER_CONSUMER_GROUP)"
    )
    parser.add_argument(
        "--state-dir", metavar="DIR",
        help="RocksDB state folder (env: LEDGER_STATE_DIR; default HOME/state)",
    )
    parser.add_argument(
        "--metrics-port", type=int, metavar="PORT",
        help="Prometheus /metrics port, 0 to disable (env: LEDGER_METRICS_PORT; default 9464)",
    )
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ledger_stream.processor.app import run_processor
    from ledger_stream.processor.metrics import serve_metrics

    settings = settings_from(
        args, processing_guarantee=args.guarantee, consumer_group=args.group,
        state_dir=args.state_dir, metrics_port=args.metrics_port,
    )
    try:
        serve_metrics(settings.metrics_port)
    except OSError as exc:
        raise CliError(f"cannot serve metrics on port {settings.metrics_port}: {exc}") from exc
    try:
        run_processor(settings)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    return 0
