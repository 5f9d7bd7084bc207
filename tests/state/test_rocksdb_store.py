"""The RocksDB store against the PartitionStore contract, plus what only it has: a state
folder per group, held by one live process at a time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_stream.state import (
    PartitionStore,
    RocksDBPartitionStore,
    StateFolder,
    StateFolderLocked,
    StoreError,
)
from ledger_stream.testing.stores import DurableStoreContract

pytestmark = pytest.mark.timeout(60)


class TestRocksDBPartitionStore(DurableStoreContract):

    @pytest.fixture(autouse=True)
    def _folder(self, tmp_path: Path) -> Iterator[None]:
        self.folder = tmp_path
        self.opened: list[PartitionStore] = []
        yield
        for store in self.opened:
            store.close()

    def make_store(self, partition: int = 0) -> PartitionStore:
        store = RocksDBPartitionStore(self.folder / f"p{partition}", partition)
        self.opened.append(store)
        return store

    def reopen(self, store: PartitionStore) -> PartitionStore:
        store.close()
        return RocksDBPartitionStore(self.folder / f"p{store.partition}", store.partition)


def test_state_folder_is_per_group_and_partition(tmp_path: Path) -> None:
    folder = StateFolder(tmp_path, "ledger/processor")
    store = folder.open(2)
    try:
        assert store.path == tmp_path.resolve() / "ledger_processor" / "p2"
    finally:
        store.close()
    assert folder.instance_hash() == StateFolder(tmp_path, "ledger/processor").instance_hash()
    assert folder.instance_hash() != StateFolder(tmp_path / "x", "ledger/processor") \
        .instance_hash()


def test_a_state_folder_is_held_by_one_live_process(tmp_path: Path) -> None:
    folder = StateFolder(tmp_path, "g")
    folder.lock()
    try:
        probe = ("import sys, pathlib; from ledger_stream.state import StateFolder, "
                 "StateFolderLocked\ntry:\n    StateFolder(pathlib.Path(sys.argv[1]), 'g')"
                 ".lock()\nexcept StateFolderLocked as e:\n    print('locked:', e)")
        out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        assert out.startswith("locked: another processor is running on the state folder")
    finally:
        folder.unlock()
    other = StateFolder(tmp_path, "g")
    other.lock()  # free again once the holder let go
    other.unlock()
    assert issubclass(StateFolderLocked, StoreError)


def test_an_unopenable_store_raises_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(StoreError, match="cannot open the state store"):
        RocksDBPartitionStore(tmp_path / "file" / "p0", 0)
