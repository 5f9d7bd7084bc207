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

Importing the package loads none of these: each name of ``__all__`` is imported from its
module on first use (PEP 562), so a process pays only for what it uses (the SDK client
brings Kafka, pydantic and Avro; a command's ``--help`` needs none of them).
"""

# ruff: noqa: E402 (the core is chosen before anything below can load the domain)
from typing import TYPE_CHECKING

from ledger_stream import core as _core

# Before anything imports the domain: the compiled core or the pure one, once per process.
CORE = _core.select()

if TYPE_CHECKING:  # what type checkers and readers see; at run time, __getattr__ below
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

# Where each public name lives: the same modules as the TYPE_CHECKING imports above
# (tests/test_lazy_imports.py checks that the two agree).
_HOMES = {
    "ledger_stream.domain.approval": ("ApprovalSigner", "sign_approval"),
    "ledger_stream.domain.events": ("Alert", "AlertKind", "Approval", "Intent", "Origin",
                                    "Receipt", "ReceiptStatus", "Workflow"),
    "ledger_stream.domain.keys": ("args_hash", "canonical_json", "operation_key"),
    "ledger_stream.sdk": ("ApprovalError", "AsyncLedgerClient", "ConflictError",
                          "EffectFailed", "ExpiredKeyError", "FrozenError", "LedgerClient",
                          "LedgerError", "LedgerUnavailable", "NeedsReconciliation",
                          "VersionHeldError"),
    "ledger_stream.serde": ("AvroCodec", "DecodeError"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


if not TYPE_CHECKING:  # hidden from type checkers: a misspelt name stays an error there

    def __getattr__(name: str) -> object:
        """A public name, imported from its module on first use (then a plain attribute)."""
        module = _HOME_OF.get(name)
        if module is None:  # a submodule too: ``from ledger_stream import tracing`` loads it
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
