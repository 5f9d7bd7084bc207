"""The view: each operation key's latest receipt and its timeline (every record of every
ledger topic, by key), materialised from the topics into a local RocksDB and served over
HTTP, so ``status(key)`` and a timeline cost one lookup however long the topics are. See
docs/view.md."""

from ledger_stream.view.follower import ReceiptView
from ledger_stream.view.history import HistoryView
from ledger_stream.view.store import ViewStore

__all__ = ["HistoryView", "ReceiptView", "ViewStore"]
