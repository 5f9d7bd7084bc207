"""The rebalance callbacks of both protocols against a recording consumer (no broker): which
partitions get a store, which the client is told to read, and which stay held."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from prometheus_client import REGISTRY

from ledger_stream.domain.policy import Policy
from ledger_stream.processor import assignment as assignment_module
from ledger_stream.processor.assignment import Assignment
from ledger_stream.processor.exceptions import ProcessorError
from ledger_stream.processor.restore import RestoreStats
from ledger_stream.state.memory import MemoryPartitionStore

INTENTS, ATTEMPTS = "ledger.intents", "ledger.attempts"


class RecordingConsumer:
    """What the callbacks told the client: its read assignment, and every call."""

    def __init__(self, committed: dict[tuple[str, int], int] | None = None) -> None:
        self.reading: dict[tuple[str, int], int] = {}
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []
        self._committed = committed or {}

    def committed(self, wanted: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition,
                               self._committed.get((tp.topic, tp.partition), -1001))
                for tp in wanted]

    def _note(self, call: str, partitions: list[TopicPartition]) -> None:
        self.calls.append((call, sorted((tp.topic, tp.partition) for tp in partitions)))

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._note("assign", partitions)
        self.reading = {(tp.topic, tp.partition): tp.offset for tp in partitions}

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._note("incremental_assign", partitions)
        for tp in partitions:
            assert (tp.topic, tp.partition) not in self.reading, "assigned twice"
            self.reading[(tp.topic, tp.partition)] = tp.offset

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._note("incremental_unassign", partitions)
        for tp in partitions:
            # librdkafka refuses to unassign what it does not read.
            assert (tp.topic, tp.partition) in self.reading, "unassigned what is not read"
            del self.reading[(tp.topic, tp.partition)]

    def resume(self, partitions: list[TopicPartition]) -> None:
        pass


class ClosingStore(MemoryPartitionStore):
    closed = False

    def close(self) -> None:
        self.closed = True


def tps(*pairs: tuple[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, partition) for topic, partition in pairs]


def both(*partitions: int) -> list[TopicPartition]:
    return tps(*[(t, p) for p in partitions for t in (INTENTS, ATTEMPTS)])


@pytest.fixture
def restored(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The partitions each restore was asked to catch up, in order."""
    calls: list[list[int]] = []

    def fake_restore(restorer: Any, changelog: str, stores: dict[int, Any],
                     committed: Any, group: str, policy: Policy,
                     ends: Any, home_count: int | None = None) -> RestoreStats:
        calls.append(sorted(stores))
        return RestoreStats()

    monkeypatch.setattr(assignment_module, "restore_partitions", fake_restore)
    return calls


def make(incremental: bool) -> tuple[Assignment, list[ClosingStore]]:
    opened: list[ClosingStore] = []

    def open_store(partition: int) -> ClosingStore:
        store = ClosingStore(partition)
        opened.append(store)
        return store

    a = Assignment(open_store, None, Policy(), (INTENTS, ATTEMPTS),  # type: ignore[arg-type]
                   "ledger.changelog", "ledger-processor", None,  # type: ignore[arg-type]
                   incremental=incremental)
    return a, opened


def test_incremental_assignment_adds_and_removes_only_what_moves(restored: list[list[int]]):
    a, opened = make(incremental=True)
    consumer = RecordingConsumer({(INTENTS, 1): 40, (ATTEMPTS, 1): 7})
    a.on_assign(consumer, both(0, 1, 2))  # type: ignore[arg-type]
    assert a.owned == [0, 1, 2] and restored == [[0, 1, 2]]
    assert consumer.reading[(INTENTS, 1)] == 40 and consumer.reading[(ATTEMPTS, 1)] == 7
    assert consumer.reading[(INTENTS, 0)] == OFFSET_BEGINNING
    kept = dict(a.stores)

    a.released = set()
    a.on_revoke(consumer, both(1))  # type: ignore[arg-type]
    assert a.owned == [0, 2] and a.released == {1}
    assert set(consumer.reading) == {(t, p) for p in (0, 2) for t in (INTENTS, ATTEMPTS)}
    assert a.stores[0] is kept[0] and a.stores[2] is kept[2], "kept partitions were reopened"
    assert [s.closed for s in opened] == [False, True, False]

    a.on_assign(consumer, both(3))  # type: ignore[arg-type]
    assert a.owned == [0, 2, 3] and restored[-1] == [3], "only the new partition is restored"
    assert a.stores[0] is kept[0]
    assert len(opened) == 4


def test_a_partition_without_its_co_partition_is_held_and_never_read(
        restored: list[list[int]]):
    a, _ = make(incremental=True)
    consumer = RecordingConsumer()
    # intents-5 comes a heartbeat before attempts-5 (its previous owner is still giving it up)
    a.on_assign(consumer, tps((INTENTS, 5)))  # type: ignore[arg-type]
    assert a.owned == [] and consumer.reading == {}
    assert consumer.calls == [("incremental_assign", [])], \
        "the callback must assign (nothing), or the client reads the lone partition itself"
    assert held_gauge() == 1
    a.on_assign(consumer, tps((ATTEMPTS, 5)))  # type: ignore[arg-type]
    assert a.owned == [5] and set(consumer.reading) == {(INTENTS, 5), (ATTEMPTS, 5)}
    assert held_gauge() == 0

    # attempts-5 leaves first: both stop being read; intents-5 is held again.
    a.on_revoke(consumer, tps((ATTEMPTS, 5)))  # type: ignore[arg-type]
    assert a.owned == [] and consumer.reading == {}
    assert a.held == {(INTENTS, 5)} and held_gauge() == 1
    # A held partition leaving is not read, so nothing is unassigned for it.
    a.on_revoke(consumer, tps((INTENTS, 5)))  # type: ignore[arg-type]
    assert consumer.calls[-1] == ("incremental_unassign", []) and a.held == set()
    assert held_gauge() == 0


def held_gauge() -> float:
    """``ledger_partitions_held`` as a scrape would read it."""
    value = REGISTRY.get_sample_value("ledger_partitions_held")
    assert value is not None
    return value


def test_a_lost_partition_closes_its_store_and_stops_being_read(restored: list[list[int]]):
    a, opened = make(incremental=True)
    consumer = RecordingConsumer()
    a.on_assign(consumer, both(0, 1))  # type: ignore[arg-type]
    a.on_lost(consumer, both(0, 1))  # type: ignore[arg-type]
    assert a.owned == [] and consumer.reading == {} and a.held == set()
    assert all(store.closed for store in opened)


def test_eager_assignment_replaces_everything_and_refuses_a_lone_partition(
        restored: list[list[int]]):
    a, _ = make(incremental=False)
    consumer = RecordingConsumer()
    a.on_assign(consumer, [*both(0), *tps((INTENTS, 1))])  # type: ignore[arg-type]
    assert a.owned == [0]
    assert consumer.calls == [("assign", [(ATTEMPTS, 0), (INTENTS, 0)])]
    a.on_revoke(consumer, [*both(0), *tps((INTENTS, 1))])  # type: ignore[arg-type]
    assert a.owned == [] and all(call != "incremental_unassign" for call, _ in consumer.calls)


def test_records_polled_across_callbacks_are_kept_only_for_an_unbroken_ownership(
        restored: list[list[int]]):
    a, _ = make(incremental=True)
    consumer = RecordingConsumer()
    a.on_assign(consumer, both(0, 1, 2))  # type: ignore[arg-type]
    a.released = set()  # the runtime, after its first poll
    a.on_revoke(consumer, both(1))  # type: ignore[arg-type]
    a.on_revoke(consumer, both(2))  # type: ignore[arg-type]
    a.on_assign(consumer, both(2, 3, 5))  # type: ignore[arg-type]
    a.on_revoke(consumer, both(5))  # type: ignore[arg-type]
    a.on_assign(consumer, both(5))  # type: ignore[arg-type]
    again = a.taken_back()
    # Released and given back: its records before the release are stale, and it is read
    # again from its committed offsets (5 was new in this poll, and still counts).
    assert again == [2, 5]
    assert a.current(0, again)  # untouched
    assert not a.current(1, again)  # released
    assert not a.current(2, again) and not a.current(5, again)
    assert a.current(3, again)  # new: read only after the callback


class MovingCoordinator(RecordingConsumer):
    """The group's coordinator is moving: the first ``failures`` lookups fail with
    ``code``."""

    def __init__(self, failures: int, code: int,
                 committed: dict[tuple[str, int], int] | None = None) -> None:
        super().__init__(committed)
        self.failures, self.code, self.asked = failures, code, 0

    def committed(self, wanted: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.asked += 1
        if self.asked <= self.failures:
            raise KafkaException(KafkaError(self.code, "moving"))
        return super().committed(wanted, timeout)


def test_committed_offsets_are_asked_again_while_the_coordinator_moves(
        restored: list[list[int]], monkeypatch: pytest.MonkeyPatch):
    """A chaos soak saw a processor exit on "Not coordinator" while its coordinator's
    broker was down; the offsets are asked again instead."""
    monkeypatch.setattr(assignment_module, "COMMITTED_RETRY_PAUSE_S", 0.0)
    a, _ = make(incremental=True)
    consumer = MovingCoordinator(2, KafkaError.NOT_COORDINATOR, {(INTENTS, 0): 12})
    a.on_assign(consumer, both(0))  # type: ignore[arg-type]
    assert consumer.asked == 3 and a.owned == [0]
    assert consumer.reading[(INTENTS, 0)] == 12


def test_other_errors_reading_committed_offsets_still_stop_the_processor(
        restored: list[list[int]]):
    a, _ = make(incremental=True)
    consumer = MovingCoordinator(1, KafkaError.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(ProcessorError, match="committed offsets"):
        a.on_assign(consumer, both(0))  # type: ignore[arg-type]
    assert consumer.asked == 1 and a.owned == []
