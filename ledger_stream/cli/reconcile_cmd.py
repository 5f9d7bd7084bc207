"""``ledger-stream reconcile list|resolve``: the operator's side of unknown outcomes."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    cell,
    check_view_url,
    checked_key,
    count,
    nonblank,
    seconds,
    settings_from,
)
from ledger_stream.domain import events as ev
from ledger_stream.history.detail import shown_detail


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reconcile", help="list and resolve keys waiting for an operator",
        description="Keys whose effect could not be confirmed or ruled out by a lookup "
        "(no lookup API, target unreachable, or not found at a target that does not "
        "deduplicate) wait in needs_reconciliation until an operator says what happened.")
    actions = parser.add_subparsers(dest="reconcile_action", metavar="ACTION", required=True)
    lst = actions.add_parser(
        "list", help="keys waiting for an operator",
        description="Keys waiting for an operator, oldest first: key, attempt, since when "
        "and why. With --json, one JSON object per key (key, attempt, since, since_ms, "
        "detail) and the count on stderr.")
    lst.add_argument("--json", action="store_true", help="one JSON object per key")
    add_common_flags(lst)
    lst.set_defaults(handler=_list)

    resolve = actions.add_parser(
        "resolve", help="record what happened to a key's open attempt",
        description="Record an operator's decision for KEY (an OperatorResolution, in the "
        "key's timeline and evidence). Refused unless the key waits for an operator at "
        "--attempt, the attempt you looked at (`reconcile list` shows it). --not-applied "
        "re-dispatches the effect with the same key once the presumed-dead holder's lease "
        "has ended. Retrying with the same --decision-id is a no-op; the same id with "
        "other contents is refused. Then waits (--wait) for the ledger's receipt naming the "
        "decision that took effect: exit 0 when it is this one (or none came within the "
        "wait: said so), 2 when another decision took effect first.")
    resolve.add_argument("key", metavar="KEY", help="operation key")
    verdict = resolve.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--applied", type=nonblank, metavar="EXT_ID",
                         help="the target did apply it; its receipt id")
    verdict.add_argument("--not-applied", action="store_true",
                         help="the target certainly did not apply it")
    verdict.add_argument("--failed", action="store_true", help="give the effect up as failed")
    resolve.add_argument("--attempt", type=count(), required=True,
                         help="the attempt you looked at: refused if the key has moved on")
    resolve.add_argument("--reason", required=True,
                         help="why: what you checked (in the key's timeline and evidence)")
    resolve.add_argument("--decision-id", default=None,
                         help="id of this decision, to retry it safely (default: new)")
    resolve.add_argument("--operator", help="who decides, for the audit topic (env: "
                         "LEDGER_OPERATOR; default: the OS user)")
    resolve.add_argument("--wait", type=seconds(zero=True), default=10.0, metavar="S",
                         help="how long to wait for the ledger to apply it (default 10)")
    resolve.add_argument("--view-url", metavar="URL",
                         help="the view whose decision index checks the id is unused "
                         "(with the API key LEDGER_VIEW_KEY; env: LEDGER_VIEW_URL; unset: the "
                         "attempts topic is read)")
    add_common_flags(resolve)
    resolve.set_defaults(handler=_resolve)


def _list(args: argparse.Namespace) -> int:
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.kafka.reader import tail_topic
    from ledger_stream.serde import DecodeError, make_codec

    settings = settings_from(args)
    codec = make_codec(settings.connection.schema_registry_url)
    latest: dict[str, ev.Receipt] = {}
    skipped = 0
    try:
        for _, _, value in tail_topic(resolve_bootstrap(settings), settings.topic("receipts"),
                                      follow=False):
            try:
                receipt = codec.decode(value) if value is not None else None
            except DecodeError:
                receipt = None
            if isinstance(receipt, ev.Receipt):
                latest[receipt.key] = receipt
            else:
                skipped += 1
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    if skipped:
        print(f"{skipped} record(s) of the receipts topic did not decode as receipts",
              file=sys.stderr)
    waiting = [r for r in latest.values()
               if r.key_status is ev.ReceiptStatus.NEEDS_RECONCILIATION]
    for r in sorted(waiting, key=lambda r: r.at_ms):
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r.at_ms / 1000))
        detail = shown_detail(r.detail)
        print(json.dumps({"key": r.key, "attempt": r.attempts, "since": since,
                          "since_ms": r.at_ms, "detail": detail}, sort_keys=True)
              if args.json else
              f"{cell(r.key)}\tattempt {r.attempts}\tsince {since}\t{cell(detail)}")
    print(f"{len(waiting)} key(s) waiting for an operator",
          file=sys.stderr if args.json else sys.stdout)
    return 0


def _resolve(args: argparse.Namespace) -> int:
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.operate import Actor, AuditNotWritten, DecisionRefused, record_decision
    from ledger_stream.sdk.errors import LedgerUnavailable
    from ledger_stream.serde import make_codec

    key = checked_key(args.key)
    settings = settings_from(args, view_url=args.view_url)
    check_view_url(settings)
    resolution = (ev.Resolution.APPLIED if args.applied else
                  ev.Resolution.NOT_APPLIED if args.not_applied else ev.Resolution.FAILED)
    decision_id = args.decision_id or uuid.uuid4().hex
    try:
        done = record_decision(
            settings, resolve_bootstrap(settings),
            make_codec(settings.connection.schema_registry_url),
            key=key, attempt=args.attempt, resolution=resolution,
            actor=Actor.from_cli(args.operator), reason=args.reason, decision_id=decision_id,
            external_id=args.applied or "", wait_s=args.wait)
    except (DecisionRefused, AuditNotWritten, LedgerUnavailable, KafkaSetupError) as exc:
        raise CliError(str(exc)) from exc
    verb = "was already recorded" if done.replayed else "recorded"
    print(f"{key}: attempt {args.attempt} {resolution.value}: decision {decision_id} {verb}; "
          + VERDICTS[done.verdict])
    return 0


VERDICTS = {
    "applied": "the ledger applied it",
    "pending": "the ledger has not applied a decision yet (is the processor running? "
               "`ledger-stream inspect KEY` shows when it does)",
    "unknown": "the key has moved on; which decision took effect is in "
               "`ledger-stream inspect KEY`",
}
