"""A fixed approver key for tests, simulations and the example worlds: its private key is
public knowledge, so only a ledger told to trust it (``approver_env``) accepts it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from ledger_stream.domain.approval import ApprovalKeys, ApprovalSigner
from ledger_stream.operate.approvals import public_key_text


def seeded_approver(key_id: str, seed: str) -> ApprovalSigner:
    """A deterministic approver key derived from ``seed`` (same seed, same key)."""
    return ApprovalSigner.from_seed(key_id, hashlib.sha256(seed.encode()).digest())


TEST_APPROVER = seeded_approver("test-approver", "ledger-stream test approver")


def trusted(*signers: ApprovalSigner, revoked: frozenset[str] = frozenset()) -> ApprovalKeys:
    """The keys that accept the signers' approvals."""
    return ApprovalKeys.of({s.key_id: s.public_bytes() for s in signers}, revoked)


def approver_env(*signers: ApprovalSigner) -> dict[str, str]:
    """The environment that makes a processor trust the signers (public keys only)."""
    return {"LEDGER_APPROVAL_PUBLIC_KEYS": ",".join(
        public_key_text(s) for s in signers or (TEST_APPROVER,))}


def write_signing_key(signer: ApprovalSigner, directory: Path) -> Path:
    """The signer's private key as ``KEY_ID.key`` (PEM, 0600) in ``directory``."""
    path = directory / f"{signer.key_id}.key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(signer.private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                                      NoEncryption()))
    return path
