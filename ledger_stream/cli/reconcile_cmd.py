"""``ledger-stream reconcile list|resolve``: the operator's side of unknown outcomes."""

from __future__ import annotations

import argparse
import getpass
import time
import uuid

from ledger_stream.cli.common import CliError, add_common_flags, settings_from
from ledger_stream.domain import events as ev


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reconcile", help="list and resolve keys waiting for an operator",
        description="Keys whose effect could not be confirmed or ruled out by a lookup "
        "(no lookup API, target unreachable, or not found at a target that does not "
        "deduplicate) wait in needs_reconciliation until an operator says what happened.")
    actions = parser.add_subparsers(dest="reconcile_action", metavar="ACTION", required=True)
    lst = actions.add_parser("list", help="keys waiting for an operator")
    add_common_flags(lst)
    lst.set_defaults(handler=_list)

    resolve = actions.add_parser(
        "resolve", help="record what happened to a key's open attempt",
        description="Produce an OperatorResolution for KEY. Refused unless the key's latest "
        "receipt is needs_reconciliation. --not-applied re-dispatches the effect with the "
        "same key once the presumed-dead holder's lease has ended.")
    resolve.add_argument("key", metavar="KEY", help="operation key")
    verdict = resolve.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--applied", metavar="EXT_ID",
                         help="the target did apply it; its receipt id")
    verdict.add_argument("--not-applied", action="store_true",
                         help="the target certainly did not apply it")
    verdict.add_argument("--failed", action="store_true", help="give the effect up as failed")
    resolve.add_argument("--operator", default=getpass.getuser(), help="who decides")
    resolve.add_argument("--note", default="", help="free text for the key's timeline")
    add_common_flags(resolve)
    resolve.set_defaults(handler=_resolve)


def _list(args: argparse.Namespace) -> int:
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.reader import read_topic

    settings = settings_from(args)
    latest: dict[str, ev.Receipt] = {}
    for receipt in read_topic(resolve_bootstrap(settings), settings.topic("receipts")):
        latest[receipt.key] = receipt
    waiting = [r for r in latest.values()
               if r.key_status is ev.ReceiptStatus.NEEDS_RECONCILIATION]
    for r in sorted(waiting, key=lambda r: r.at_ms):
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r.at_ms / 1000))
        print(f"{r.key}\tattempt {r.attempts}\tsince {since}\t{r.detail}")
    print(f"{len(waiting)} key(s) waiting for an operator")
    return 0


def _resolve(args: argparse.Namespace) -> int:
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.producer import EventProducer
    from ledger_stream.kafka.receipts import key_receipts

    settings = settings_from(args)
    bootstrap = resolve_bootstrap(settings)
    receipts = key_receipts(bootstrap, settings.topic("receipts"), args.key)
    if not receipts:
        raise CliError(f"{args.key}: no such key in the ledger")
    latest = receipts[-1]
    if latest.key_status is not ev.ReceiptStatus.NEEDS_RECONCILIATION:
        raise CliError(f"{args.key} is not waiting for an operator "
                       f"(status {latest.key_status.value})")
    resolution = (ev.Resolution.APPLIED if args.applied else
                  ev.Resolution.NOT_APPLIED if args.not_applied else ev.Resolution.FAILED)
    producer = EventProducer(settings, bootstrap)
    producer.send("attempts", ev.OperatorResolution(
        uuid.uuid4().hex, args.key, latest.attempts, resolution, args.operator,
        int(time.time() * 1000), args.applied or "", args.note))
    producer.flush()
    print(f"{args.key}: attempt {latest.attempts} resolved as {resolution.value}")
    return 0
