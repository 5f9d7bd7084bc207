"""The processor's state: one store per partition (rows, timer index, partition clock,
changelog offset) behind :class:`PartitionStore`, in memory or in RocksDB."""

from ledger_stream.state.base import PartitionStore, StoreBatch, TimerEntry
from ledger_stream.state.exceptions import StateFolderLocked, StoreError
from ledger_stream.state.folder import StateFolder
from ledger_stream.state.memory import MemoryPartitionStore
from ledger_stream.state.rocksdb import RocksDBPartitionStore
from ledger_stream.state.rows import decode_row, encode_row

__all__ = [
    "MemoryPartitionStore",
    "PartitionStore",
    "RocksDBPartitionStore",
    "StateFolder",
    "StateFolderLocked",
    "StoreBatch",
    "StoreError",
    "TimerEntry",
    "decode_row",
    "encode_row",
]
