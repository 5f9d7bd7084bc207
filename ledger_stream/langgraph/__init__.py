"""LangGraph integration (``pip install ledger-stream[langgraph]``).

``ledger_tool`` turns a function returning an effect's material arguments into a tool whose
effect the ledger applies once per operation key, a key it derives from business identity
only (``key=`` is required); ``LedgerReceipts`` is the state field the
receipts land in; ``@observed(source=...)`` marks a node whose result comes from outside
(a retrieval, a price lookup) and records its digest in ``LedgerObservations``, evidence
the intents that follow carry; ``ReceiptFollower`` settles threads left holding a pending receipt.
``LedgerMiddleware`` (``pip install ledger-stream[agents]``) does it for every tool of a
LangChain ``create_agent`` agent, each tool declared an ``Effect`` or read-only.
Tested with langgraph 1.2.22, langgraph-checkpoint-sqlite 3.1.2, langchain 1.5.0.
"""

from typing import TYPE_CHECKING, Any

from ledger_stream.langgraph.follower import ReceiptFollower
from ledger_stream.langgraph.observed import LedgerObservations, merge_observations, observed
from ledger_stream.langgraph.tool import (
    LedgerReceipts,
    MissingKeyError,
    ledger_tool,
    merge_receipts,
    receipt_summary,
)

if TYPE_CHECKING:
    from ledger_stream.langgraph.middleware import Effect, LedgerMiddleware


def __getattr__(name: str) -> Any:
    # The middleware needs langchain (the [agents] extra); ledger_tool does not.
    if name in ("Effect", "LedgerMiddleware"):
        from ledger_stream.langgraph import middleware

        return getattr(middleware, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Effect",
    "LedgerMiddleware",
    "LedgerObservations",
    "LedgerReceipts",
    "MissingKeyError",
    "ReceiptFollower",
    "ledger_tool",
    "merge_observations",
    "merge_receipts",
    "observed",
    "receipt_summary",
]
