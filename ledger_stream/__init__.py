"""ledger-stream: effectively-once side effects for AI agents, on Kafka.

The public surface for agent code::

    from ledger_stream import LedgerClient, Workflow, operation_key

    with LedgerClient() as ledger:
        key = operation_key("acme", "refund", "invoice-881")
        intent = ledger.intent(key, "refund", "payments", {"amount": 125, "currency": "EUR"},
                               workflow=Workflow("refund-agent", "1.0"))
        receipt = ledger.submit(intent, wait=30)   # the original receipt on every re-run

Reading a ledger topic yourself (receipts, alerts, ...) with any Kafka consumer::

    from ledger_stream import AvroCodec

    event = AvroCodec().decode(message.value())   # a Receipt, an Alert, ...
"""

# ruff: noqa: E402 (the core is chosen before the imports below load the domain)
from ledger_stream import core as _core

# Before anything imports the domain: the compiled core or the pure one, once per process.
CORE = _core.select()

from ledger_stream.domain.approval import ApprovalSigner, sign_approval
from ledger_stream.domain.events import (
    Alert,
    AlertKind,
    Approval,
    Intent,
    Origin,
    Receipt,
    ReceiptStatus,
    Workflow,
)
from ledger_stream.domain.keys import args_hash, canonical_json, operation_key
from ledger_stream.sdk import (
    ApprovalError,
    AsyncLedgerClient,
    ConflictError,
    EffectFailed,
    ExpiredKeyError,
    FrozenError,
    LedgerClient,
    LedgerError,
    LedgerUnavailable,
    NeedsReconciliation,
    VersionHeldError,
)
from ledger_stream.serde import AvroCodec, DecodeError

__all__ = [
    "Alert",
    "AlertKind",
    "Approval",
    "ApprovalError",
    "AsyncLedgerClient",
    "AvroCodec",
    "ConflictError",
    "DecodeError",
    "EffectFailed",
    "ExpiredKeyError",
    "Intent",
    "LedgerClient",
    "LedgerError",
    "LedgerUnavailable",
    "NeedsReconciliation",
    "Origin",
    "Receipt",
    "ReceiptStatus",
    "FrozenError",
    "VersionHeldError",
    "Workflow",
    "args_hash",
    "canonical_json",
    "operation_key",
    "sign_approval",
    "ApprovalSigner",
]
