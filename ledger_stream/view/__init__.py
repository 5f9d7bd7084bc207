"""The receipts view: each operation key's latest receipt, materialised from the compacted
receipts topic into a local RocksDB and served over HTTP, so ``status(key)`` costs one
lookup however many receipts the topic holds. See docs/view.md."""

from ledger_stream.view.follower import ReceiptView
from ledger_stream.view.store import ViewStore

__all__ = ["ReceiptView", "ViewStore"]
