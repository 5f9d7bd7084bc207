"""The agent-side SDK: build intents, submit them, read receipts.

The clients (Kafka, pydantic, Avro) are imported on first use: a module that needs only the
errors (the processor's approvals, the operator commands) loads none of them.
"""

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from ledger_stream.sdk.client import AsyncLedgerClient, LedgerClient

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

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name not in ("AsyncLedgerClient", "LedgerClient"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from ledger_stream.sdk import client

        return getattr(client, name)
