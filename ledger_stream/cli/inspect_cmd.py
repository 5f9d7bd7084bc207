"""``ledger-stream inspect KEY``: a key's timeline (one row per event), and
``ledger-stream evidence KEY``: everything known about it as one redacted JSON file."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    checked_key,
    iso_ms,
    settings_from,
)

COLUMNS = ("time", "topic", "offset", "event", "intent", "attempt", "claim", "outcome",
           "receipt", "next state", "external id", "detail")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inspect = subparsers.add_parser(
        "inspect", help="a key's timeline: one row per event, from every ledger topic",
        description="Print KEY's timeline: one row per event of the key in the intents, "
        "attempts, dispatch, receipts, alerts and DLQ topics, ordered by the ledger's clock "
        "(broker timestamps of inputs, the partition clock of outputs; never a client's). "
        "A field an event does not carry is '-', never inferred. Reads only the key's "
        "partition of each topic. Exit status 1 when the ledger has no record of the key.")
    inspect.add_argument("key", metavar="KEY", help="operation key, e.g. acme/refund/inv-881")
    inspect.add_argument("--json", action="store_true",
                         help="one JSON object per row (every field) instead of a table")
    add_common_flags(inspect)
    inspect.set_defaults(handler=_inspect)

    evidence = subparsers.add_parser(
        "evidence", help="everything known about a key, as one redacted JSON file",
        description="Write KEY's evidence for an incident review: the raw events with "
        "topic, partition and offset (in log order), the timeline, receipts, alerts and "
        "operator decisions. Arguments, payloads and connector error texts are replaced by "
        "their length, approval signatures dropped. Exit status 1 when the ledger has no "
        "record of the key.")
    evidence.add_argument("key", metavar="KEY", help="operation key")
    evidence.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    add_common_flags(evidence)
    evidence.set_defaults(handler=_evidence)


def _records(args: argparse.Namespace) -> list[Any]:
    from confluent_kafka import KafkaException

    from ledger_stream.history import read_key
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError, kafka_error_text

    checked_key(args.key)
    settings = settings_from(args)
    try:
        return read_key(resolve_bootstrap(settings), settings, args.key)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    except KafkaException as exc:
        raise CliError(f"cannot read the ledger topics: {kafka_error_text(exc)}") from exc


def _inspect(args: argparse.Namespace) -> int:
    from ledger_stream.history import timeline

    records = _records(args)
    if not records:
        print(f"no record of {args.key} in the ledger")
        return 1
    rows = timeline(records)
    if args.json:
        for row in rows:
            print(json.dumps(row.as_dict(), sort_keys=True))
        return 0
    print("\t".join(COLUMNS))
    for r in rows:
        print("\t".join(_cell(v) for v in (
            iso_ms(r.ledger_time_ms), r.role, f"{r.partition}@{r.offset}", r.event,
            r.intent_event_id, r.attempt, r.claim_id, r.outcome, r.receipt, r.next_state,
            r.external_id, r.detail)))
    state = next((r.next_state for r in reversed(rows) if r.next_state), None)
    print(f"{len(rows)} event(s); the key is {state or 'unknown (no receipt)'}",
          file=sys.stderr)
    return 0


def _cell(value: Any) -> str:
    return "-" if value is None else str(value).replace("\t", " ").replace("\n", " ")


def _evidence(args: argparse.Namespace) -> int:
    from ledger_stream.history import evidence

    records = _records(args)
    if not records:
        print(f"no record of {args.key} in the ledger", file=sys.stderr)
        return 1
    text = json.dumps(evidence(args.key, records, int(time.time() * 1000)), indent=2,
                      sort_keys=True)
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as out:
                out.write(text + "\n")
        except OSError as exc:
            raise CliError(f"cannot write {args.out}: {exc}") from exc
        print(f"wrote {args.out} ({len(records)} records)", file=sys.stderr)
    else:
        print(text)
    return 0
