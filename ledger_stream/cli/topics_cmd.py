"""``ledger-stream topics create``: the ledger topics (docs/design.md, 'Topics and events'),
created idempotently."""

from __future__ import annotations

import argparse

from ledger_stream.cli.common import CliError, add_common_flags, seconds, settings_from
from ledger_stream.kafka.bootstrap import resolve_bootstrap
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.kafka.topics import LEDGER_TOPICS, create_topics


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "topics",
        help="create the ledger topics",
        description=f"The {len(LEDGER_TOPICS)} ledger topics, each named <prefix>.NAME: "
        f"{', '.join(LEDGER_TOPICS)}.",
    )
    actions = parser.add_subparsers(dest="topics_action", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create",
        help="create missing ledger topics and check existing ones",
        description="Create the missing ledger topics on LEDGER_KAFKA_BOOTSTRAP (or the running "
        "local Kafka). Existing topics are compared with the settings, never altered: a "
        "difference is reported and the exit status is 2.",
    )
    create.add_argument(
        "--partitions",
        type=int,
        metavar="N",
        help="partition count shared by all ledger topics (env: LEDGER_PARTITIONS, default 12)",
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        metavar="N",
        help="replication factor of the ledger topics (env: LEDGER_REPLICATION_FACTOR, default 1)",
    )
    create.add_argument(
        "--timeout",
        type=seconds(),
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for Kafka's answers (default 30)",
    )
    add_common_flags(create)
    create.set_defaults(handler=_create)


def _create(args: argparse.Namespace) -> int:
    settings = settings_from(
        args, partitions=args.partitions, replication_factor=args.replication_factor
    )
    try:
        bootstrap = resolve_bootstrap(settings)
        reports = create_topics(bootstrap, settings, timeout_s=args.timeout)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    for report in reports:
        print(report.line())
    differing = [report.topic for report in reports if report.status == "differs"]
    if differing:
        raise CliError(
            f"{len(differing)} existing topic(s) differ from the settings and were not altered: "
            f"{', '.join(differing)}"
        )
    return 0
