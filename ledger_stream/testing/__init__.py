"""What your own tests need to test code built on the ledger, without Kafka.

- :class:`InMemoryLedger`: the ``LedgerClient`` interface (``intent``, ``submit``,
  ``status``) over the ledger's real decision core (``ledger_stream.domain.decide``): the
  receipts your agent code gets and the dispatches a connector would apply are the ones
  the processor would produce for the same intents.
- :class:`MemoryTarget`: a Target holding its effects in a dict; it deduplicates by key
  and can be told to fail the next call as real systems fail.
- :class:`TargetContract` / :class:`DeduplicatingTargetContract`: the test cases every
  Target of this project passes; subclass one in your test module to prove your own
  connector (``targets.py`` says what to provide).
- :class:`PartitionStoreContract` / :class:`DurableStoreContract`: the same for a state
  store backend.

The contract classes are pytest test cases (they import pytest, loaded on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger_stream.connector.memory import MemoryTarget
from ledger_stream.testing.ledger import InMemoryLedger

if TYPE_CHECKING:
    from ledger_stream.testing.stores import DurableStoreContract, PartitionStoreContract
    from ledger_stream.testing.targets import (
        DeduplicatingTargetContract,
        TargetContract,
        effect_request,
    )

__all__ = [
    "DeduplicatingTargetContract",
    "DurableStoreContract",
    "InMemoryLedger",
    "MemoryTarget",
    "PartitionStoreContract",
    "TargetContract",
    "effect_request",
]

_CONTRACTS = {
    "TargetContract": "targets", "DeduplicatingTargetContract": "targets",
    "effect_request": "targets",
    "PartitionStoreContract": "stores", "DurableStoreContract": "stores",
}


def __getattr__(name: str) -> Any:
    # The contracts import pytest: loaded when asked for, so the ledger and the target work
    # in tests run by anything else.
    if name in _CONTRACTS:
        from importlib import import_module

        return getattr(import_module(f"ledger_stream.testing.{_CONTRACTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
