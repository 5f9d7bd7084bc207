"""Approval binding: an approval is valid for one key, one argument hash, one policy revision,
until its expiry, and only with the approval service's HMAC signature.

Signing lives here too so that the approval service and the ledger share one definition of
the signed bytes.
"""

from __future__ import annotations

import hashlib
import hmac

from ledger_stream.domain.events import Approval, Intent


def _signed_text(key: str, approval_id: str, payload_hash: str, policy_revision: str,
                 expires_at_ms: int) -> bytes:
    return "\n".join(
        ("ledger-approval-v1", key, approval_id, payload_hash, policy_revision,
         str(expires_at_ms))
    ).encode("utf-8")


def sign_approval(secret: bytes, key: str, approval_id: str, payload_hash: str,
                  policy_revision: str, expires_at_ms: int) -> Approval:
    """Approve ``payload_hash`` (the intent's args hash) for ``key`` until ``expires_at_ms``."""
    text = _signed_text(key, approval_id, payload_hash, policy_revision, expires_at_ms)
    signature = hmac.new(secret, text, hashlib.sha256).hexdigest()
    return Approval(approval_id, payload_hash, policy_revision, expires_at_ms, signature)


def approval_problem(intent: Intent, secret: bytes, required: bool,
                     now_ms: int | None) -> str | None:
    """Why the intent's approval is unacceptable, or None when it is acceptable.

    An approval that is present is always checked, even for actions that do not need one:
    a forged approval is a signal worth an alert. Expiry is judged at ``now_ms``, the
    processor's partition clock, never the intent's own ``at_ms`` (a client could back-date
    it); ``None`` skips the expiry check, for a duplicate of an intent whose approval was
    valid when it reserved the key.
    """
    approval = intent.approval
    if approval is None:
        return "approval missing" if required else None
    expected = sign_approval(
        secret, intent.key, approval.approval_id, approval.payload_hash,
        approval.policy_revision, approval.expires_at_ms,
    ).signature
    # As bytes: compare_digest refuses str with non-ASCII characters (TypeError), and a
    # forged signature can hold any (found by the coverage-guided fuzzer).
    given = approval.signature.encode("utf-8", "surrogatepass")
    if not hmac.compare_digest(expected.encode(), given):
        return "approval signature invalid"
    if approval.payload_hash != intent.args_hash:
        return "approval payload hash differs from the intent's args hash"
    if intent.policy_revision and approval.policy_revision != intent.policy_revision:
        return "approval policy revision differs from the intent's"
    if now_ms is not None and now_ms >= approval.expires_at_ms:
        return "approval expired"
    return None
