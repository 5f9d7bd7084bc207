"""Approver keys on disk, and issuing an approval.

An approver's private key is a PEM (PKCS#8) Ed25519 key in ``KEY_ID.key``, readable by its
owner only; its public key is ``KEY_ID.pub`` (PEM SubjectPublicKeyInfo), the file that is
distributed to the processors and to ``upgrade-check``. ``openssl genpkey -algorithm
ed25519`` makes the same kind of private key.
"""

from __future__ import annotations

import base64
import binascii
import os
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from ledger_stream.domain.approval import (
    ApprovalSigner,
    InvalidApprovalKey,
    check_key_id,
    sign_approval,
)
from ledger_stream.domain.events import Approval

PRIVATE_SUFFIX = ".key"
PUBLIC_SUFFIX = ".pub"
# An approval lives long enough for the agent to attach it and no longer by default.
DEFAULT_EXPIRES_IN_S = 600
# Ten years: far beyond any approval, and its expiry in ms fits Avro's long with room.
MAX_EXPIRES_IN_S = 10 * 366 * 86_400


def new_signer(key_id: str) -> ApprovalSigner:
    """A new approver key from the operating system's randomness."""
    return ApprovalSigner(check_key_id(key_id), Ed25519PrivateKey.generate())


def write_keypair(key_id: str, out_dir: Path) -> tuple[Path, Path]:
    """Make a new approver key: ``KEY_ID.key`` (mode 0600, never overwritten) and
    ``KEY_ID.pub`` in ``out_dir``. Returns their paths."""
    signer = new_signer(key_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    private = out_dir / f"{key_id}{PRIVATE_SUFFIX}"
    public = out_dir / f"{key_id}{PUBLIC_SUFFIX}"
    for path in (private, public):
        if path.exists():
            raise InvalidApprovalKey(f"{path} exists: a key id names one key for good "
                                     "(choose a new id to rotate)")
    pem = signer.private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    # Created 0600 in one call: the private key is never readable by others, not even for
    # the moment between a write and a chmod.
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public.write_bytes(signer.private_key.public_key().public_bytes(
        Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    return private, public


def load_signer(path: Path, key_id: str | None = None) -> ApprovalSigner:
    """The approver key in ``path`` (PEM Ed25519 private key); its id is ``key_id``, else
    the file's name without ``.key``."""
    try:
        loaded = load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise InvalidApprovalKey(f"cannot read the signing key {path}: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise InvalidApprovalKey(f"{path} is not an unencrypted PEM private key: {exc}"
                                 ) from None
    if not isinstance(loaded, Ed25519PrivateKey):
        raise InvalidApprovalKey(f"{path} holds a {type(loaded).__name__}, not an Ed25519 key")
    return ApprovalSigner(check_key_id(key_id or path.name.removesuffix(PRIVATE_SUFFIX)),
                          loaded)


def public_keys_in(directory: Path) -> dict[str, bytes]:
    """The raw public keys of the ``KEY_ID.pub`` files in ``directory``, by key id."""
    if not directory.is_dir():
        raise InvalidApprovalKey(f"approval keys directory {directory} does not exist")
    found = {}
    for path in sorted(directory.glob(f"*{PUBLIC_SUFFIX}")):
        key_id = check_key_id(path.name.removesuffix(PUBLIC_SUFFIX))
        try:
            loaded = load_pem_public_key(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise InvalidApprovalKey(f"{path}: not a PEM public key ({exc})") from None
        if not isinstance(loaded, Ed25519PublicKey):
            raise InvalidApprovalKey(f"{path}: not an Ed25519 public key")
        found[key_id] = loaded.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return found


def public_keys_from_text(text: str) -> dict[str, bytes]:
    """``KEY_ID=BASE64[,KEY_ID=BASE64...]`` (raw 32-byte keys) as a mapping."""
    found = {}
    for n, item in enumerate(p.strip() for p in text.replace("\n", ",").split(",")):
        if not item:
            continue
        key_id, eq, encoded = item.partition("=")
        if not eq:
            raise InvalidApprovalKey(f"approval public keys item {n + 1}: not KEY_ID=BASE64")
        try:
            found[check_key_id(key_id.strip())] = base64.b64decode(encoded.strip(),
                                                                   validate=True)
        except binascii.Error:
            raise InvalidApprovalKey(f"approval public key {key_id.strip()!r}: not base64"
                                     ) from None
    return found


def public_key_text(signer: ApprovalSigner) -> str:
    """The ``KEY_ID=BASE64`` form of the signer's public key (for LEDGER_APPROVAL_PUBLIC_KEYS)."""
    return f"{signer.key_id}={base64.b64encode(signer.public_bytes()).decode()}"


def approve(signer: ApprovalSigner, key: str, args_hash: str, *,
            expires_in_s: float = DEFAULT_EXPIRES_IN_S, policy_revision: str = "",
            approval_id: str = "", now_ms: int | None = None) -> Approval:
    """Sign an approval of ``args_hash`` for ``key``, valid for ``expires_in_s`` seconds."""
    if not 0 < expires_in_s <= MAX_EXPIRES_IN_S:  # also refuses NaN
        raise ValueError(f"an approval must expire in the future, within {MAX_EXPIRES_IN_S} "
                         f"s (an expiry is an Avro long of milliseconds), not {expires_in_s}")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return sign_approval(signer, key, approval_id or f"ap-{uuid.uuid4().hex[:12]}", args_hash,
                         policy_revision, now + int(expires_in_s * 1000))


def approval_json(approval: Approval) -> dict[str, Any]:
    """The approval as the agent attaches it (the SDK's and the gateway's ``approval``)."""
    return asdict(approval)
