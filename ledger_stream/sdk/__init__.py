"""The agent-side SDK: build intents, submit them, read receipts."""

from ledger_stream.sdk.client import AsyncLedgerClient, LedgerClient
from ledger_stream.sdk.errors import (
    ApprovalError,
    ConflictError,
    EffectFailed,
    ExpiredKeyError,
    FrozenError,
    InvalidIntentError,
    LedgerError,
    LedgerUnavailable,
    NeedsReconciliation,
    StaleStatusError,
    VersionHeldError,
    ViewUnavailableError,
)

__all__ = [
    "ApprovalError",
    "AsyncLedgerClient",
    "ConflictError",
    "EffectFailed",
    "ExpiredKeyError",
    "InvalidIntentError",
    "LedgerClient",
    "LedgerError",
    "LedgerUnavailable",
    "NeedsReconciliation",
    "StaleStatusError",
    "FrozenError",
    "VersionHeldError",
    "ViewUnavailableError",
]
