"""``ledger-stream receipts KEY``: a key's receipts, as a table or JSON lines."""

from __future__ import annotations

import argparse
import json

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    cell,
    check_view_url,
    checked_key,
    iso_ms,
    kafka_failure,
    settings_from,
)
from ledger_stream.domain import events as ev
from ledger_stream.history.detail import shown_detail

COLUMNS = ("at", "status", "key_status", "reason", "attempts", "external_id", "intent_event_id")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "receipts", help="print a key's receipts (or only its latest, from the view)",
        description="Print every receipt of KEY still in <prefix>.receipts, oldest first, "
        "reading only the key's partition (compaction keeps at least the latest). With "
        "--latest only the key's current receipt, asked from the receipts view when "
        "LEDGER_VIEW_URL is set. Exit status 1 when the key has no receipt.",
    )
    parser.add_argument("key", metavar="KEY", help="operation key, e.g. acme/refund/inv-881")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per receipt (the Avro fields) instead of a table")
    parser.add_argument("--latest", action="store_true", help="only the latest receipt")
    parser.add_argument("--view-url", metavar="URL",
                        help="receipts view to ask with --latest, with the API key LEDGER_VIEW_KEY "
                        "(env: LEDGER_VIEW_URL)")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.kafka.receipts import key_receipts
    from ledger_stream.sdk import (
        LedgerClient,
        LedgerUnavailable,
        StaleStatusError,
        ViewUnavailableError,
    )

    checked_key(args.key)
    settings = settings_from(args, view_url=args.view_url)
    check_view_url(settings)
    try:
        if args.latest:
            with LedgerClient(settings) as client:
                latest = client.status(args.key)
            found = [latest] if latest is not None else []
        else:
            found = key_receipts(resolve_bootstrap(settings), settings.topic("receipts"),
                                 args.key)
    except (KafkaSetupError, LedgerUnavailable, StaleStatusError, ViewUnavailableError) as exc:
        raise CliError(str(exc)) from exc
    except KafkaException as exc:
        raise kafka_failure(exc, "cannot read receipts") from exc
    if not found:
        print(f"no receipt for {args.key}")
        return 1
    if args.json:
        from ledger_stream.serde.records import to_record
        for receipt in found:
            print(json.dumps({**to_record(receipt), "detail": shown_detail(receipt.detail)},
                             sort_keys=True))
    else:
        print("\t".join(COLUMNS))
        for receipt in found:
            print("\t".join(_row(receipt)))
    return 0


def _row(r: ev.Receipt) -> tuple[str, ...]:
    return tuple(cell(v) for v in (iso_ms(r.at_ms), r.status.value, r.key_status.value,
                                   r.reason.value, r.attempts, r.external_id or None,
                                   r.intent_event_id))
