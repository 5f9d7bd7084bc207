"""``ledger-stream inspect KEY``: a key's timeline (one row per event). From the view's
timeline when LEDGER_VIEW_URL names one (one lookup), else from the key's partition of every
ledger topic (``evidence_cmd`` reads the same way)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    cell,
    check_view_url,
    checked_key,
    iso_ms,
    kafka_failure,
    seconds,
    settings_from,
)
from ledger_stream.history.timeline import TimelineRow

T = TypeVar("T")
COLUMNS = ("time", "topic", "offset", "event", "intent", "attempt", "claim", "outcome",
           "receipt", "next state", "external id", "detail")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inspect = subparsers.add_parser(
        "inspect", help="a key's timeline: one row per event, from every ledger topic",
        description="Print KEY's timeline: one row per event of the key in the intents, "
        "attempts, dispatch, receipts, alerts, DLQ and audit topics (with the audit records "
        "of the freezes of its action), ordered by the ledger's clock "
        "(broker timestamps of inputs, the partition clock of outputs; never a client's). "
        "A field an event does not carry is '-', never inferred. With LEDGER_VIEW_URL set "
        "the view answers (caught up to every record committed when the command began); "
        "otherwise, or with --scan, the key's partition of each topic is read. Exit status "
        "1 when the ledger has no record of the key, 2 when it cannot be asked.")
    inspect.add_argument("key", metavar="KEY", help="operation key, e.g. acme/refund/inv-881")
    inspect.add_argument("--json", action="store_true",
                         help="one JSON object per row (every field) instead of a table")
    inspect.add_argument("--limit", type=int, default=1_000, metavar="N",
                         help="show the latest N rows (default 1000)")
    source_flags(inspect)
    add_common_flags(inspect)
    inspect.set_defaults(handler=_inspect)


def source_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--view-url", metavar="URL",
                        help="the view to ask, with the API key LEDGER_VIEW_KEY "
                        "(env: LEDGER_VIEW_URL; unset: read the topics)")
    parser.add_argument("--scan", action="store_true",
                        help="read the key's partition of every topic even when "
                        "LEDGER_VIEW_URL names a view")
    parser.add_argument("--wait", type=seconds(zero=True), default=5.0, metavar="S",
                        help="how long the view may take to catch up (default 5)")


def ask(args: argparse.Namespace, what: Callable[[Any], T]) -> T:
    """``what(client)`` with a client of the view (or of the topics, with --scan); one line
    for any failure to ask."""
    from confluent_kafka import KafkaException

    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.sdk import LedgerClient
    from ledger_stream.sdk.errors import (
        LedgerUnavailable,
        StaleTimelineError,
        ViewUnavailableError,
    )

    checked_key(args.key)
    settings = settings_from(args, view_url=args.view_url)
    check_view_url(settings)
    if args.scan:
        settings = settings.model_copy(update={"view_url": None})
    try:
        with LedgerClient(settings) as client:
            return what(client)
    except (KafkaSetupError, LedgerUnavailable, ViewUnavailableError) as exc:
        raise CliError(str(exc)) from exc
    except StaleTimelineError as exc:
        raise CliError(f"{exc}; ask again, wait longer (--wait) or use --scan") from exc
    except KafkaException as exc:
        raise kafka_failure(exc, "cannot read the ledger topics") from exc


def _inspect(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(f"--limit must be 1 or more, got {args.limit}")
    rows = ask(args, lambda client: client.timeline(args.key, args.wait, args.limit))
    if len(rows) == args.limit:
        print(f"showing the latest {args.limit} rows; earlier ones may exist (--limit)",
              file=sys.stderr)
    if not rows:
        print(f"no record of {args.key} in the ledger")
        return 1
    if args.json:
        for row in rows:
            print(json.dumps(row.as_dict(), sort_keys=True))
        return 0
    print("\t".join(COLUMNS))
    for r in rows:
        print("\t".join(cell(v) for v in (
            iso_ms(r.ledger_time_ms), r.role, f"{r.partition}@{r.offset}", r.event,
            r.intent_event_id, r.attempt, r.claim_id, r.outcome, r.receipt, r.next_state,
            r.external_id, _detail(r))))
    state = next((r.next_state for r in reversed(rows) if r.next_state), None)
    print(f"{len(rows)} event(s); the key is {state or 'unknown (no receipt)'}",
          file=sys.stderr)
    return 0


def _detail(row: TimelineRow) -> str | None:
    """The row's detail, then what its step observed and the flag of a changed reading."""
    parts = [row.detail, row.observed and f"observed {row.observed}",
             row.flag and f"FLAGGED {row.flag}"]
    return "; ".join(p for p in parts if p) or None
