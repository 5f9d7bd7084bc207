"""LangGraph integration (``pip install ledger-stream[langgraph]``).

``ledger_tool`` turns a function returning an effect's material arguments into a tool whose
effect the ledger applies once per operation key; ``LedgerReceipts`` is the state field the
receipts land in; ``ReceiptFollower`` settles threads left holding a pending receipt.
Tested with langgraph 1.2.22, langgraph-checkpoint-sqlite 3.1.2.
"""

from ledger_stream.langgraph.follower import ReceiptFollower
from ledger_stream.langgraph.tool import (
    LedgerReceipts,
    ToolCall,
    ledger_tool,
    merge_receipts,
    receipt_summary,
)

__all__ = [
    "LedgerReceipts",
    "ReceiptFollower",
    "ToolCall",
    "ledger_tool",
    "merge_receipts",
    "receipt_summary",
]
