"""The approval policy: which actions need an approval, and whose signature counts."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from ledger_stream.settings.group import SettingsGroup, flat_config


class PolicySettings(SettingsGroup):
    """Approver keys the ledger trusts and the actions that need them (flat names
    ``approval_*``, and ``dev_mode``)."""

    model_config = flat_config("approval_", dev_mode="dev_mode")

    dev_mode: bool = Field(
        False, description="development mode: approvals may also be signed with the "
        "shared HMAC secret (LEDGER_APPROVAL_SECRET, or a built-in public one)")
    secret: SecretStr | None = Field(
        None, description="development mode only: the shared HMAC key of approvals without "
        "a key id (ignored outside dev_mode, where approver keys sign)"
    )
    keys_dir: Path | None = Field(
        None, description="directory of the approver public keys the ledger trusts, one "
        "KEY_ID.pub file each (PEM, as `ledger-stream approval-keys generate` writes)")
    public_keys: str | None = Field(
        None, description="more trusted approver public keys, KEY_ID=BASE64[,KEY_ID=BASE64...] "
        "(the raw 32-byte Ed25519 key, base64)")
    revoked_keys: tuple[str, ...] = Field(
        (), description="approver key ids whose approvals are refused, even when still listed")
    signing_key: Path | None = Field(
        None, description="an approver's private key file (`approve`, the gateway's approval "
        "route); never needed by the processor")
    required_actions: tuple[str, ...] = Field(
        (), description="action types that need a valid approval"
    )
