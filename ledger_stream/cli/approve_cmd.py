"""``ledger-stream approve KEY [ARGS_HASH]`` and ``ledger-stream approval-keys generate``.

An approver signs with a private key that only approvers hold; the ledger holds the public
key (operate/approvals.py). ``approve`` prints the approval as JSON, which the agent attaches
to its intent (the SDK's and the gateway's ``approval``).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from ledger_stream.cli.common import CliError, add_common_flags, checked_key, seconds, settings_from
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import InvalidApprovalKey

MAX_EXPIRES_IN_S = 10 * 366 * 86_400  # operate.approvals' bound (imported when signing)

ARGS_HASH = re.compile(r"^[0-9a-f]{64}$")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    approve = subparsers.add_parser(
        "approve", help="sign an approval of a key's arguments (prints JSON)",
        description="Approve KEY's effect with the arguments whose hash is ARGS_HASH, signed "
        "with an approver's private key. Without ARGS_HASH nothing is signed: the hash of "
        "the key's pending intent (its latest receipt, rejected for a missing approval) is "
        "read from the ledger and shown, to be checked and then named. Prints the approval "
        "as JSON for the agent to attach to its intent; the "
        "ledger accepts it only while its key id is trusted and not revoked, for this key "
        "and these arguments, until it expires.")
    approve.add_argument("key", metavar="KEY", help="the operation key, tenant/action/id")
    approve.add_argument("args_hash", metavar="ARGS_HASH", nargs="?",
                         help="the args_hash approved (64 hex digits); without it, the "
                         "pending intent's is shown and nothing is signed")
    approve.add_argument("--signing-key", type=Path, metavar="FILE",
                         help="the approver's private key, KEY_ID.key (env: "
                         "LEDGER_APPROVAL_SIGNING_KEY)")
    approve.add_argument("--key-id", help="the key id (default: the file's name without .key)")
    approve.add_argument("--expires-in", type=seconds(most=MAX_EXPIRES_IN_S), default=600.0,
                         metavar="S",
                         help="seconds the approval is valid (default 600)")
    approve.add_argument("--policy-revision", default="", metavar="REV",
                         help="the policy revision the intent runs under, if it names one")
    approve.add_argument("--approval-id", default="", help="id of this approval "
                         "(default: new)")
    approve.add_argument("--operator", help="who approves, for the audit topic (env: "
                         "LEDGER_OPERATOR; default: the OS user)")
    add_common_flags(approve)
    approve.set_defaults(handler=_approve)

    keys = subparsers.add_parser(
        "approval-keys", help="make approver keys",
        description="Approver keys: `generate` writes KEY_ID.key (the private key, mode "
        "0600: for the approver only) and KEY_ID.pub (for the processors' "
        "LEDGER_APPROVAL_KEYS_DIR and upgrade-check).")
    actions = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    generate = actions.add_parser("generate", help="make a new approver keypair")
    generate.add_argument("--key-id", required=True,
                          help="a new id for the key, e.g. ops-2026-01 (never reused)")
    generate.add_argument("--out", type=Path, required=True, metavar="DIR",
                          help="directory to write KEY_ID.key and KEY_ID.pub into")
    generate.set_defaults(handler=_generate)


def _approve(args: argparse.Namespace) -> int:
    from ledger_stream.operate.approvals import approval_json, approve, load_signer

    key = checked_key(args.key)
    settings = settings_from(args)
    if args.args_hash is not None and not ARGS_HASH.match(args.args_hash):
        raise CliError(f"{args.args_hash!r} is not an args hash (64 lowercase hex digits)")
    if args.args_hash is None:
        # Never sign what the ledger holds now: the agent chooses its latest intent, so it
        # could swap in other arguments between an operator's look and the signature. No
        # signing key needed to look.
        pending = _pending_hash(settings, key)
        raise CliError(f"{key} waits for an approval of args_hash {pending}: check those "
                       f"arguments (`ledger-stream inspect {key}`), then approve them by "
                       f"naming the hash: ledger-stream approve {key} {pending}")
    path = args.signing_key or settings.policy.signing_key
    if path is None:
        raise CliError("no signing key: give --signing-key FILE (or LEDGER_APPROVAL_SIGNING_KEY)"
                       "; make one with `ledger-stream approval-keys generate`")
    try:
        signer = load_signer(path, args.key_id)
        approval = approve(signer, key, args.args_hash, expires_in_s=args.expires_in,
                           policy_revision=args.policy_revision,
                           approval_id=args.approval_id)
    except (InvalidApprovalKey, ValueError) as exc:
        raise CliError(str(exc)) from None
    _audit(settings, args.operator, key, approval, signer.key_id)
    print(json.dumps(approval_json(approval)))
    return 0


def _audit(settings: Settings, operator: str | None, key: str, approval: ev.Approval,
           signing_key_id: str) -> None:
    """The approval's audit record, written before the approval is printed: none is
    handed out without one (CliError when it cannot be written)."""
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.operate.audit import (
        ROLE_APPROVER,
        Actor,
        AuditNotWritten,
        approval_detail,
        record_approval,
    )
    from ledger_stream.serde import make_codec

    cli = Actor.from_cli(operator)
    actor = Actor(cli.who, ROLE_APPROVER, f"{cli.credential} approval-key:{signing_key_id}")
    try:
        record_approval(settings, resolve_bootstrap(settings),
                        make_codec(settings.connection.schema_registry_url), actor, key,
                        approval.approval_id, approval_detail(approval, signing_key_id))
    except (AuditNotWritten, KafkaSetupError) as exc:
        raise CliError(f"no approval printed: {exc}") from exc


def _pending_hash(settings: Settings, key: str) -> str:
    """The args hash of ``key``'s intent waiting for an approval: its latest receipt must be
    a rejection for a missing approval (not for a forged or expired one)."""
    from ledger_stream.domain import events as ev
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.sdk import LedgerClient
    from ledger_stream.sdk.errors import (
        LedgerUnavailable,
        StaleStatusError,
        ViewUnavailableError,
    )

    try:
        with LedgerClient(settings) as client:
            receipt = client.status(key, wait=10.0)
    except (LedgerUnavailable, StaleStatusError, ViewUnavailableError,
            KafkaSetupError) as exc:
        raise CliError(str(exc)) from exc
    if receipt is None:
        raise CliError(f"no receipt for {key}: give ARGS_HASH")
    if not (receipt.status is ev.ReceiptStatus.REJECTED and receipt.reason is ev.Reason.APPROVAL
            and receipt.key_status is ev.ReceiptStatus.REJECTED
            and receipt.detail == "approval missing"):
        raise CliError(f"{key} is not waiting for an approval (its latest receipt: "
                       f"{receipt.status.value}/{receipt.reason.value}): give ARGS_HASH")
    return receipt.args_hash


def _generate(args: argparse.Namespace) -> int:
    from ledger_stream.operate.approvals import write_keypair

    try:
        private, public = write_keypair(args.key_id, args.out)
    except (InvalidApprovalKey, OSError) as exc:
        raise CliError(str(exc)) from None
    print(f"private key (approver only, mode 0600): {private}")
    print(f"public key (processors, upgrade-check): {public}")
    return 0
