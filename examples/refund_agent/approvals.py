"""The approval service of the example: signs the refund a human was shown with the approver
key in LEDGER_APPROVAL_SIGNING_KEY (the processor holds only its public key)."""

from __future__ import annotations

from typing import Any

from examples.refund_agent.graph import refund_key
from ledger_stream import args_hash
from ledger_stream.config import Settings
from ledger_stream.operate.approvals import approval_json, approve, load_signer


def sign_refund(settings: Settings, material: dict[str, Any]) -> dict[str, Any]:
    """The approval of ``material``'s refund, valid for ten minutes."""
    if settings.approval_signing_key is None:
        raise SystemExit("set LEDGER_APPROVAL_SIGNING_KEY to an approver key file "
                         "(ledger-stream approval-keys generate) to approve refunds")
    signer = load_signer(settings.approval_signing_key)
    return approval_json(approve(signer, refund_key(material),
                                 args_hash(material), expires_in_s=600))
