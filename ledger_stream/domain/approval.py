"""Approval binding: an approval is valid for one key, one argument hash, one policy revision,
until its expiry, and only with an Ed25519 signature by an approver key the ledger trusts.

Approvers hold private keys; the processor, ``upgrade-check`` and every checker hold only
public keys, by key id. So nothing that can verify an approval can issue one: a worker, or
any host holding the processor's whole configuration, cannot approve its own payment. Several
public keys may be trusted at once (rotation) and a key id may be revoked.

The symmetric (HMAC) form of the first version survives only for development mode: a policy
carries a ``dev_secret`` only when the processor runs with ``LEDGER_DEV_MODE=1``.

Signing lives here too so that approvers and the ledger share one definition of the signed
bytes. Pure: the keys are data in the policy, nothing is read here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ledger_stream.domain.events import Approval, Intent

# A key id names files (``<id>.pub``) and appears in alerts: short and plain.
KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class InvalidApprovalKey(ValueError):
    """A key id or key material that cannot be an approver key (says which and why)."""


def check_key_id(key_id: str) -> str:
    # fullmatch: ``$`` would also match before a trailing line break.
    if not KEY_ID.fullmatch(key_id):
        raise InvalidApprovalKey(
            f"approval key id {key_id!r}: 1-64 letters, digits, '.', '_' or '-', starting "
            "with a letter or digit")
    return key_id


@dataclass(frozen=True, slots=True)
class ApprovalKeys:
    """Which approvals the ledger accepts: Ed25519 public keys (raw 32 bytes) by key id, the
    revoked key ids (refused even when still listed as public), and, in development mode
    only, the HMAC secret of approvals without a key id."""

    public: tuple[tuple[str, bytes], ...] = ()
    revoked: frozenset[str] = frozenset()
    # Never shown: a policy's repr may reach a log.
    dev_secret: bytes | None = field(default=None, repr=False)

    @classmethod
    def of(cls, public: Mapping[str, bytes], revoked: frozenset[str] = frozenset(),
           dev_secret: bytes | None = None) -> ApprovalKeys:
        for key_id, raw in public.items():
            check_key_id(key_id)
            if len(raw) != 32:
                raise InvalidApprovalKey(f"approval key {key_id!r}: an Ed25519 public key "
                                         f"is 32 bytes, not {len(raw)}")
        # A revoked id that is no key id (a stray space) would silently revoke nothing.
        return cls(tuple(sorted(public.items())),
                   frozenset(check_key_id(key_id) for key_id in revoked), dev_secret)

    def public_key(self, key_id: str) -> bytes | None:
        return next((raw for known, raw in self.public if known == key_id), None)


@dataclass(frozen=True)
class ApprovalSigner:
    """An approver's private key and its id: what ``ledger-stream approve`` and the
    gateway sign with. Never part of a policy. (A new one is made outside the domain, which
    draws no randomness: ``operate.approvals.new_signer``.)"""

    key_id: str
    private_key: Ed25519PrivateKey = field(repr=False)

    @classmethod
    def from_seed(cls, key_id: str, seed: bytes) -> ApprovalSigner:
        """A deterministic key from a 32-byte seed (simulations and tests)."""
        return cls(check_key_id(key_id), Ed25519PrivateKey.from_private_bytes(seed))

    def public_bytes(self) -> bytes:
        return self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def trusted(self, revoked: frozenset[str] = frozenset()) -> ApprovalKeys:
        """The keys that accept this signer's approvals (for tests and simulations)."""
        return ApprovalKeys.of({self.key_id: self.public_bytes()}, revoked)


def _line_break_in(*fields: str) -> bool:
    """Whether a signed field holds a line break. The signed text is its fields one per
    line, which is unambiguous only without one: else key ``a/b/c\\nx`` with approval id
    ``y`` signs the same bytes as key ``a/b/c`` with approval id ``x\\ny``, and an approval
    of one key would approve another."""
    return any("\n" in f for f in fields)


def _no_line_break(*fields: str) -> None:
    if _line_break_in(*fields):
        raise ValueError("an approval's key, approval id, args hash and policy revision may "
                         "not hold a line break")


def _signed_text(key_id: str, key: str, approval_id: str, payload_hash: str,
                 policy_revision: str, expires_at_ms: int) -> bytes:
    # Version 2 names the signing key: a signature cannot be moved to another key id.
    return "\n".join(
        ("ledger-approval-v2", key_id, key, approval_id, payload_hash, policy_revision,
         str(expires_at_ms))
    ).encode("utf-8")


def _dev_signed_text(key: str, approval_id: str, payload_hash: str, policy_revision: str,
                     expires_at_ms: int) -> bytes:
    return "\n".join(
        ("ledger-approval-v1", key, approval_id, payload_hash, policy_revision,
         str(expires_at_ms))
    ).encode("utf-8")


def sign_approval(signer: ApprovalSigner, key: str, approval_id: str, payload_hash: str,
                  policy_revision: str, expires_at_ms: int) -> Approval:
    """Approve ``payload_hash`` (the intent's args hash) for ``key`` until ``expires_at_ms``,
    signed by ``signer`` (its key id travels in the approval). ValueError when a field
    holds a line break."""
    _no_line_break(key, approval_id, payload_hash, policy_revision)
    text = _signed_text(signer.key_id, key, approval_id, payload_hash, policy_revision,
                        expires_at_ms)
    signature = signer.private_key.sign(text).hex()
    return Approval(approval_id, payload_hash, policy_revision, expires_at_ms, signature,
                    signer.key_id)


def sign_dev_approval(secret: bytes, key: str, approval_id: str, payload_hash: str,
                      policy_revision: str, expires_at_ms: int) -> Approval:
    """The development-mode approval: HMAC-SHA256 with the shared secret, no key id.
    Accepted only by a processor in development mode. ValueError as ``sign_approval``."""
    _no_line_break(key, approval_id, payload_hash, policy_revision)
    text = _dev_signed_text(key, approval_id, payload_hash, policy_revision, expires_at_ms)
    signature = hmac.new(secret, text, hashlib.sha256).hexdigest()
    return Approval(approval_id, payload_hash, policy_revision, expires_at_ms, signature)


def approval_problem(intent: Intent, keys: ApprovalKeys, required: bool,
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
    problem = _signature_problem(intent.key, approval, keys)
    if problem is not None:
        return problem
    if approval.payload_hash != intent.args_hash:
        return "approval payload hash differs from the intent's args hash"
    if intent.policy_revision and approval.policy_revision != intent.policy_revision:
        return "approval policy revision differs from the intent's"
    if now_ms is not None and now_ms >= approval.expires_at_ms:
        return "approval expired"
    return None


def _signature_problem(key: str, approval: Approval, keys: ApprovalKeys) -> str | None:
    if _line_break_in(key, approval.approval_id, approval.payload_hash,
                      approval.policy_revision):
        return "approval field holds a line break"
    if not approval.key_id:
        return _dev_signature_problem(key, approval, keys.dev_secret)
    if approval.key_id in keys.revoked:
        return f"approval key {_shown(approval.key_id)} revoked"
    raw = keys.public_key(approval.key_id)
    if raw is None:
        return f"approval key {_shown(approval.key_id)} unknown"
    try:
        signature = bytes.fromhex(approval.signature)
    except ValueError:
        return "approval signature invalid"
    text = _signed_text(approval.key_id, key, approval.approval_id, approval.payload_hash,
                        approval.policy_revision, approval.expires_at_ms)
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, text)
    except InvalidSignature:
        return "approval signature invalid"
    return None


def _dev_signature_problem(key: str, approval: Approval, secret: bytes | None) -> str | None:
    if secret is None:
        return "approval has no key id (a development-mode approval)"
    text = _dev_signed_text(key, approval.approval_id, approval.payload_hash,
                            approval.policy_revision, approval.expires_at_ms)
    expected = hmac.new(secret, text, hashlib.sha256).hexdigest()
    # As bytes: compare_digest refuses str with non-ASCII characters (TypeError), and a
    # forged signature can hold any (found by the coverage-guided fuzzer).
    given = approval.signature.encode("utf-8", "surrogatepass")
    if not hmac.compare_digest(expected.encode(), given):
        return "approval signature invalid"
    return None


def _shown(key_id: str) -> str:
    """A key id as an alert may quote it: a forged one is any text, so only its valid form
    is shown verbatim."""
    return repr(key_id) if KEY_ID.fullmatch(key_id) else f"(invalid id, {len(key_id)} chars)"
