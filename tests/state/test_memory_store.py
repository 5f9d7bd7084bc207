"""The memory store against the PartitionStore contract."""

from __future__ import annotations

import pytest

from ledger_stream.state import MemoryPartitionStore, PartitionStore
from ledger_stream.testing.stores import PartitionStoreContract

pytestmark = pytest.mark.timeout(30)


class TestMemoryPartitionStore(PartitionStoreContract):
    def make_store(self, partition: int = 0) -> PartitionStore:
        return MemoryPartitionStore(partition)
