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
from ledger_stream.state.base import StoreBatch
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


def test_a_timer_added_before_the_earliest_known_is_found(tmp_path: Path) -> None:
    """The store seeks its timers from the earliest it found (the tombstones of removed
    timers below it are not walked again); a timer added below that is still found."""
    store = RocksDBPartitionStore(tmp_path / "p0", 0)
    try:
        store.write(StoreBatch(timers_added=[(500, "late")]))
        store.write(StoreBatch(timers_added=[(300, "gone")]))
        store.write(StoreBatch(timers_removed=[(300, "gone")]))
        assert store.next_due() == 500
        store.write(StoreBatch(timers_added=[(100, "early")]))
        assert store.next_due() == 100
        assert list(store.due_timers(200)) == [(100, "early")]
        store.write(StoreBatch(timers_removed=[(100, "early"), (500, "late")]))
        assert store.next_due() is None
        assert list(store.due_timers(10_000)) == []
        store.write(StoreBatch(timers_added=[(-5, "past")]))  # stored at 0
        assert store.next_due() == 0
        assert list(store.due_timers(0)) == [(0, "past")]
    finally:
        store.close()


def test_a_timer_written_during_a_seek_is_not_hidden(tmp_path: Path) -> None:
    """A write that lands while next_due's iterator seeks (the checkpoint's thread) is not
    in the iterator's view: the earliest that seek found is no floor for what came after."""
    store = RocksDBPartitionStore(tmp_path / "p0", 0)
    try:
        store.write(StoreBatch(timers_added=[(500, "late")]))
        db = store._db
        real_iter = db.iter

        class Racing:
            def __init__(self) -> None:
                self._it = real_iter()

            def __getattr__(self, name: str) -> object:
                return getattr(self._it, name)

            def seek(self, target: bytes) -> None:
                self._it.seek(target)
                store.write(StoreBatch(timers_added=[(50, "racing")]))

        store._db = type("Db", (), {"iter": lambda _: Racing(),
                                    "write": lambda _, wb: db.write(wb)})()
        assert store.next_due() == 500  # the iterator's view: from before the write
        store._db = db
        assert store.next_due() == 50
        assert list(store.due_timers(100)) == [(50, "racing")]
    finally:
        store._db = db
        store.close()
