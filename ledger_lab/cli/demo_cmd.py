"""``ledger-stream demo``: the ledger on a real Kafka, start to finish, in about a minute."""

from __future__ import annotations

import argparse

from ledger_stream.cli.common import CliError, add_common_flags, settings_from
from ledger_stream.kafka.exceptions import KafkaSetupError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the end-to-end demo on a local Kafka it starts and stops",
        description="Start a local Kafka (unless LEDGER_KAFKA_BOOTSTRAP is set), create "
        "demo topics, run the processor, replay an agent's refund step several ways and "
        "show that the target saw one effect. Exit status 0 when it did.",
    )
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ledger_lab.demo import run_demo

    try:
        return run_demo(settings_from(args), say=lambda line: print(line, flush=True))
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
