"""The contract every PartitionStore keeps, as pytest test cases: the memory and the RocksDB
store pass it, and so must any other backend. Subclass ``PartitionStoreContract`` in a
``Test*`` class and define ``make_store(partition)``; a durable backend subclasses
``DurableStoreContract`` and also defines ``reopen(store)`` (the same partition's store
opened again, as after a restart)."""

from __future__ import annotations

from ledger_stream.state import PartitionStore, StoreBatch


class PartitionStoreContract:
    """Subclasses define ``make_store(partition)``; a durable backend subclasses
    ``DurableStoreContract`` and defines ``reopen(store)`` (the same partition's store opened
    again)."""

    def make_store(self, partition: int = 0) -> PartitionStore:
        raise NotImplementedError

    def reopen(self, store: PartitionStore) -> PartitionStore:
        raise NotImplementedError

    def test_a_new_store_is_empty(self) -> None:
        store = self.make_store(3)
        assert store.partition == 3
        assert store.get("acme/pay/1") is None
        assert (store.clock_ms, store.changelog_offset) == (0, 0)
        assert list(store.due_timers(2**62)) == []
        assert store.next_due() is None

    def test_rows_clock_and_offset_are_written_together(self) -> None:
        store = self.make_store()
        store.write(StoreBatch({"acme/pay/1": b"[1]", "acme/pay/2": b"[2]"}, (), (), 500, 7))
        assert store.get("acme/pay/1") == b"[1]"
        assert store.get("acme/pay/2") == b"[2]"
        assert (store.clock_ms, store.changelog_offset) == (500, 7)
        store.write(StoreBatch({"acme/pay/1": b"[3]"}))
        assert store.get("acme/pay/1") == b"[3]"
        assert (store.clock_ms, store.changelog_offset) == (500, 7)  # None: unchanged

    def test_the_clock_never_moves_back(self) -> None:
        store = self.make_store()
        store.write(StoreBatch(clock_ms=900))
        store.write(StoreBatch(clock_ms=100))
        assert store.clock_ms == 900

    def test_timers_come_in_due_then_key_order_within_bounds(self) -> None:
        store = self.make_store()
        entries = [(300, "b"), (100, "z"), (300, "a"), (200, "m"), (2**40, "far")]
        store.write(StoreBatch(timers_added=entries))
        assert list(store.due_timers(300)) == [(100, "z"), (200, "m"), (300, "a"), (300, "b")]
        assert list(store.due_timers(300, after_ms=100)) == [(200, "m"), (300, "a"),
                                                             (300, "b")]
        assert list(store.due_timers(99)) == []
        assert store.next_due() == 100
        assert store.next_due(after_ms=300) == 2**40
        assert store.next_due(after_ms=2**40) is None

    def test_a_batch_removes_before_it_adds(self) -> None:
        store = self.make_store()
        store.write(StoreBatch(timers_added=[(100, "k"), (150, "j")]))
        # Moving k: remove its old entry, add the new one; an entry both removed and added
        # in one batch stays.
        store.write(StoreBatch(timers_removed=[(100, "k"), (150, "j")],
                               timers_added=[(400, "k"), (150, "j")]))
        assert list(store.due_timers(1000)) == [(150, "j"), (400, "k")]
        store.write(StoreBatch(timers_removed=[(999, "nobody")]))  # absent: no error
        assert list(store.due_timers(1000)) == [(150, "j"), (400, "k")]

    def test_keys_are_text_with_any_characters(self) -> None:
        store = self.make_store()
        key = "tenant/act/ünïcode 42"
        store.write(StoreBatch({key: b"[]"}, timers_added=[(5, key)]))
        assert store.get(key) == b"[]"
        assert list(store.due_timers(5)) == [(5, key)]


class DurableStoreContract(PartitionStoreContract):
    """The contract plus durability: subclasses also define ``reopen(store)``."""

    def test_a_durable_store_keeps_everything_across_reopen(self) -> None:
        store = self.make_store(1)
        store.write(StoreBatch({"k": b"[9]"}, (), [(50, "k")], 1234, 99))
        again = self.reopen(store)
        assert again.get("k") == b"[9]"
        assert list(again.due_timers(50)) == [(50, "k")]
        assert (again.clock_ms, again.changelog_offset, again.partition) == (1234, 99, 1)
        again.close()
