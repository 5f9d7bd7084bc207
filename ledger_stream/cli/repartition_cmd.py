"""``ledger-stream repartition --to N``: grow the ledger's topics with every key's state
(ledger_stream/operate/repartition.py; docs/operations.md, "Growing partitions")."""

from __future__ import annotations

import argparse

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    count,
    kafka_failure,
    seconds,
    settings_from,
)
from ledger_stream.kafka.bootstrap import resolve_bootstrap
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.settings.topics import MAX_PARTITIONS


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "repartition",
        help="grow the ledger topics to N partitions, moving every key's state",
        description="With every processor stopped: check that every input is decided, grow "
        "every ledger topic to N, rewrite each moved key's state and deadlines at its "
        "new partition, carry the freezes and held keys, then record the new count. Safe "
        "to run again after a crash.",
    )
    # The settings' bound: a count above it would leave every processor refusing to start.
    parser.add_argument("--to", type=count(most=MAX_PARTITIONS), required=True, metavar="N",
                        help="the new partition count (larger than the recorded one, at most "
                        f"{MAX_PARTITIONS:,})")
    parser.add_argument("--timeout", type=seconds(), default=30.0, metavar="SECONDS",
                        help="how long to wait for Kafka's answers (default 30)")
    parser.add_argument("--group", metavar="NAME", help="the processors' consumer group "
                        "(env: LEDGER_CONSUMER_GROUP)")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from ledger_stream.operate.repartition import RepartitionRefused, repartition

    settings = settings_from(args, consumer_group=args.group)
    try:
        repartition(resolve_bootstrap(settings), settings, args.to, args.timeout)
    except (RepartitionRefused, KafkaSetupError) as exc:
        raise CliError(f"repartition refused: {exc}") from exc
    except KafkaException as exc:
        raise kafka_failure(exc, "repartition failed (run it again)") from exc
    return 0
