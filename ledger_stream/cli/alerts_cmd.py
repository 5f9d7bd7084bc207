"""``ledger-stream alerts [--follow] [--kind K] [--tenant T]``: the ledger's alerts, as a
table or JSON lines, then (with ``--follow``) each new one as it is raised."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterable
from typing import Any

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    cell,
    iso_ms,
    kafka_failure,
    settings_from,
)
from ledger_stream.domain import events as ev
from ledger_stream.history.detail import shown_detail

COLUMNS = ("at", "kind", "key", "detail", "partition", "offset")
KINDS = tuple(k.value for k in ev.AlertKind)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "alerts", help="print the ledger's alerts (and follow new ones)",
        description="Print every alert still in <prefix>.alerts, oldest first (by the "
        "alert's time across all partitions), then exit; with --follow keep printing new "
        "alerts as they land until Ctrl-C or SIGTERM. A record that does not decode as an "
        "alert is reported on stderr with its position and skipped. Alerts carry keys, ids "
        "and hashes, never arguments.")
    parser.add_argument("--follow", "-f", action="store_true",
                        help="after the alerts already raised, print each new one")
    parser.add_argument("--kind", action="append", choices=KINDS, metavar="KIND",
                        help=f"only alerts of this kind (repeatable): {', '.join(KINDS)}")
    parser.add_argument("--tenant", metavar="T", help="only alerts for keys of tenant T")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per alert (its fields, partition and offset)")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from ledger_stream.domain.keys import InvalidKeyError, operation_key
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.kafka.reader import tail_topic
    from ledger_stream.serde import make_codec

    if args.tenant is not None:
        try:
            operation_key(args.tenant, "alerts", "check")
        except InvalidKeyError as exc:
            raise CliError(f"--tenant {args.tenant!r}: {exc}") from exc
    settings = settings_from(args)
    topic = settings.topic("alerts")
    kinds = set(args.kind or KINDS)
    prefix = f"{args.tenant}/" if args.tenant is not None else ""
    stop = threading.Event()
    if args.follow:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    codec, shown = make_codec(settings.connection.schema_registry_url), 0
    if not args.json:
        print("\t".join(COLUMNS), flush=True)
    try:
        bootstrap = resolve_bootstrap(settings)
        backlog, seen = _backlog(tail_topic(bootstrap, topic, follow=False), codec, topic)
        for alert, partition, offset in backlog:
            if not _wanted(alert, kinds, prefix):
                continue
            shown += 1
            print(_line(alert, partition, offset, args.json), flush=True)
        records = tail_topic(bootstrap, topic, follow=True, stop=stop) if args.follow else ()
        for partition, offset, value in records:
            if offset < seen.get(partition, 0):
                continue  # printed with the backlog
            new = _decoded(codec, value, topic, partition, offset)
            if new is None or not _wanted(new, kinds, prefix):
                continue
            shown += 1
            print(_line(new, partition, offset, args.json), flush=True)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    except KafkaException as exc:
        raise kafka_failure(exc, f"cannot read {topic}") from exc
    except KeyboardInterrupt:
        pass
    print(f"{shown} alert(s)", file=sys.stderr)
    return 0


def _backlog(records: Iterable[tuple[int, int, bytes | None]], codec: Any, topic: str,
             ) -> tuple[list[tuple[ev.Alert, int, int]], dict[int, int]]:
    """The alerts already raised, oldest first, and each partition's next offset.

    Partitions interleave in no order of their own, so they are merged by the alert's time
    (then partition and offset, for a stable order among equal times)."""
    seen: dict[int, int] = {}
    alerts = []
    for partition, offset, value in records:
        seen[partition] = offset + 1
        alert = _decoded(codec, value, topic, partition, offset)
        if alert is not None:
            alerts.append((alert, partition, offset))
    return sorted(alerts, key=lambda r: (r[0].at_ms, r[1], r[2])), seen


def _wanted(alert: ev.Alert, kinds: set[str], prefix: str) -> bool:
    return alert.kind.value in kinds and alert.key.startswith(prefix)


def _decoded(codec: Any, value: bytes | None, topic: str, partition: int,
             offset: int) -> ev.Alert | None:
    try:
        event = codec.decode(value) if value is not None else None
    except Exception as exc:  # a bad record is reported, never fatal
        print(f"skipped {topic}[{partition}]@{offset}: {exc}", file=sys.stderr)
        return None
    if not isinstance(event, ev.Alert):
        print(f"skipped {topic}[{partition}]@{offset}: not an alert "
              f"({type(event).__name__})", file=sys.stderr)
        return None
    return event


def _line(alert: ev.Alert, partition: int, offset: int, as_json: bool) -> str:
    if as_json:
        from ledger_stream.serde.records import to_record

        return json.dumps({**to_record(alert), "detail": shown_detail(alert.detail),
                           "partition": partition, "offset": offset}, sort_keys=True)
    return "\t".join(cell(v) for v in (iso_ms(alert.at_ms), alert.kind.value, alert.key,
                                        shown_detail(alert.detail), partition, offset))
