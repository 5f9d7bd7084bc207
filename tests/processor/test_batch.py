"""Step a over fake records: time is the records' broker timestamps (the partition clock),
timers fire before the record that moved the clock past them, Ticks only move the clock,
and the batch knows which offsets it commits."""

from __future__ import annotations

import heapq
import random

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.deadlines import TIMER_CLAIM
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.batch import Batch, in_time_order
from ledger_stream.processor.changelog import Positions
from ledger_stream.state import MemoryPartitionStore
from tests.factories import claim, intent
from tests.processor.fakes import (
    ATTEMPTS,
    CODEC,
    INTENTS,
    PARTITIONS,
    FakeMessage,
    make_step,
    record_of,
)

pytestmark = pytest.mark.timeout(30)

KEY = "acme/pay/k1"
P = partition_for(KEY, PARTITIONS)
POLICY = Policy(stall_after_ms=1_000, clock_skew_ms=0, reconcile_timeout_ms=10_000)


COMMITTED = Positions(10, 20)


def _batch(stores: dict[int, MemoryPartitionStore], committed: Positions = COMMITTED
           ) -> Batch:
    return Batch(make_step(POLICY), stores, {P: committed},  # type: ignore[arg-type]
                 (INTENTS, ATTEMPTS))


def _decoded(batch: Batch) -> list[object]:
    return [CODEC.decode(o.value) for o in batch.outputs]


def _tick(offset: int, timestamp: int) -> FakeMessage:
    return FakeMessage(ATTEMPTS, P, offset, timestamp, b"~tick",
                       CODEC.encode(ev.Tick(P, "test", 0)))


def test_decisions_use_the_broker_timestamp_not_the_event_clock() -> None:
    batch = _batch({P: MemoryPartitionStore(P)})
    event = intent(key=KEY, at_ms=1)  # whatever the producer's clock said
    batch.add(record_of(event, INTENTS, 10, 50_000))
    receipt = next(o for o in _decoded(batch) if isinstance(o, ev.Receipt))
    assert receipt.at_ms == 50_000
    assert batch.overlays[P].clock == 50_000


def test_the_partition_clock_never_goes_back_for_an_older_timestamp() -> None:
    # A producer's clock that went back stamps a later record earlier (CreateTime): the
    # partition clock stays where it was, and the record is decided at that time.
    batch = _batch({P: MemoryPartitionStore(P)})
    batch.add(record_of(intent(key=KEY), INTENTS, 10, 50_000))
    other = "acme/pay/k3"  # in the same partition
    assert partition_for(other, PARTITIONS) == P
    batch.add(record_of(intent(key=other), INTENTS, 11, 40_000))
    assert batch.overlays[P].clock == 50_000
    stamps = [o.at_ms for o in _decoded(batch) if isinstance(o, ev.Receipt)]
    assert stamps == [50_000, 50_000]


def test_a_tick_fires_a_deadline_with_no_other_traffic() -> None:
    store = MemoryPartitionStore(P)
    first = _batch({P: store})
    first.add(record_of(intent(key=KEY), INTENTS, 10, 1_000))
    first.add(record_of(claim(key=KEY, lease_ms=100), ATTEMPTS, 20, 1_000))
    overlay = first.overlays[P]
    store.write(overlay.store_batch(None))  # as step d would
    # Lease until 1,100; reconciled at lease + skew (0) + stall (1,000) = 2,100.
    second = _batch({P: store}, first.positions(P))
    second.add(_tick(21, 2_099))
    assert second.outputs == []
    second.add(_tick(22, 2_100))
    out = _decoded(second)
    assert [type(o).__name__ for o in out] == ["Reconcile", "Receipt"]
    assert out[0].claim_id == TIMER_CLAIM  # type: ignore[attr-defined]
    assert out[1].status is ev.ReceiptStatus.RECONCILING  # type: ignore[attr-defined]
    assert second.positions(P) == Positions(11, 23)


def test_timers_fire_before_the_record_that_moved_the_clock() -> None:
    store = MemoryPartitionStore(P)
    first = _batch({P: store})
    first.add(record_of(intent(key=KEY), INTENTS, 10, 1_000))
    first.add(record_of(claim(key=KEY, lease_ms=100), ATTEMPTS, 20, 1_000))
    store.write(first.overlays[P].store_batch(None))
    second = _batch({P: store})
    # The holder's outcome arrives after its deadline: the timer reconciles first, then
    # the outcome settles the reconciliation.
    late = ev.AttemptOutcome("o-1", KEY, 1, "c1", ev.OutcomeStatus.SUCCEEDED, 1, "ext-1")
    second.add(record_of(late, ATTEMPTS, 21, 5_000))
    kinds = [(type(o).__name__, getattr(o, "status", None)) for o in _decoded(second)]
    assert kinds == [("Reconcile", None), ("Receipt", ev.ReceiptStatus.RECONCILING),
                     ("Receipt", ev.ReceiptStatus.SUCCEEDED)]


def test_offsets_cover_both_topics_of_each_partition_read() -> None:
    batch = _batch({P: MemoryPartitionStore(P)}, Positions(10, -1))
    batch.add(record_of(intent(key=KEY), INTENTS, 10, 1_000))
    batch.add(record_of(intent(key=KEY), INTENTS, 11, 1_000))
    assert batch.positions(P) == Positions(12, -1)
    assert [(tp.topic, tp.partition, tp.offset) for tp in batch.offsets()] == \
        [(INTENTS, P, 12)]
    batch.add(_tick(0, 1_500))
    assert [(tp.topic, tp.offset) for tp in batch.offsets()] == [(INTENTS, 12), (ATTEMPTS, 1)]


def test_a_poll_is_decided_in_time_order_across_partitions_and_offset_order_within_each() -> None:
    """At least once, a new owner reads attempts-p and intents-p from the committed offsets,
    and the client may hand over the claims (drawn by its predecessor's dispatches) before
    the intent that caused them: in time order the intent is decided first."""
    event = intent(key=KEY, at_ms=1)
    reserved = Batch(make_step(POLICY), {P: MemoryPartitionStore(P)},  # type: ignore[arg-type]
                     {P: COMMITTED}, (INTENTS, ATTEMPTS))
    reserved.add(record_of(event, INTENTS, 10, 100))
    dispatch = next(o for o in _decoded(reserved) if isinstance(o, ev.Dispatch))
    came = [_tick(19, 80),  # older than the intent: decided first (time, not topic, order)
            record_of(claim(key=KEY, attempt=dispatch.attempt, at_ms=1), ATTEMPTS, 20, 200),
            _tick(21, 150),  # a clock that went back (CreateTime): still after offset 20
            record_of(event, INTENTS, 10, 100),
            record_of(intent(key="acme/pay/other", at_ms=1), INTENTS, 11, 90, partition=P)]

    ordered = in_time_order(came)  # type: ignore[arg-type]
    assert [(m.topic(), m.offset()) for m in ordered] == [
        (ATTEMPTS, 19), (INTENTS, 10), (INTENTS, 11), (ATTEMPTS, 20), (ATTEMPTS, 21)]

    batch = _batch({P: MemoryPartitionStore(P)})
    for msg in ordered:
        batch.add(msg)
    decided = _decoded(batch)
    assert any(isinstance(o, ev.Grant) for o in decided)
    assert not any(isinstance(o, ev.Done | ev.Alert) for o in decided)
    assert batch.positions(P) == Positions(12, 22)


def test_a_claim_asking_for_a_lease_beyond_a_day_is_poison_not_a_crash() -> None:
    # Found by a hostile review (2026-12-05): a lease of 2**63-1 ms overflowed the Grant's
    # lease_until in the Avro encoder, and the processor died on the record at every start.
    batch = _batch({P: MemoryPartitionStore(P)})
    batch.add(record_of(intent(key=KEY), INTENTS, 10, 1_000))
    batch.add(record_of(claim(key=KEY, lease_ms=2**63 - 1), ATTEMPTS, 20, 1_100))
    outputs = _decoded(batch)
    assert any(isinstance(o, ev.DeadLetter) for o in outputs)
    assert not any(isinstance(o, ev.Grant) for o in outputs)


def test_a_batch_arms_deadlines_from_when_its_outputs_leave() -> None:
    """A processor a minute behind the log (longer than lease + skew + stall + reconcile
    timeout here): the Grant leaves a minute after its claim's timestamp, so the backlog
    read after it expires nothing; the holder's late ``not_called`` moves the key on. The
    deadline reaches the store and the changelog header as it was armed."""
    lag = 60_000
    store = MemoryPartitionStore(P)

    def batch_at(sent_ms: int) -> Batch:
        return Batch(make_step(POLICY), {P: store}, {P: COMMITTED},  # type: ignore[arg-type]
                     (INTENTS, ATTEMPTS), sent_ms=sent_ms)

    first = batch_at(1_000 + lag)
    first.add(record_of(intent(key=KEY), INTENTS, 10, 1_000))
    first.add(record_of(claim(key=KEY, lease_ms=100), ATTEMPTS, 20, 1_100))
    overlay = first.overlays[P]
    assert overlay.row_dues()[KEY] == ("ledger.due.v2", b"l%d" % (1_000 + lag))
    store.write(overlay.store_batch(None))
    backlog = batch_at(2 * lag)
    for offset, at in enumerate(range(1_200, 1_000 + lag, 500), start=21):
        backlog.add(_tick(offset, at))
    assert backlog.outputs == []
    store.write(backlog.overlays[P].store_batch(None))
    answer = batch_at(2 * lag + 100)
    late = ev.AttemptOutcome("o-1", KEY, 1, "c1", ev.OutcomeStatus.NOT_CALLED, 1)
    answer.add(record_of(late, ATTEMPTS, 200, 1_000 + lag + 50))
    kinds = [(type(o).__name__, getattr(o, "attempt", None)) for o in _decoded(answer)]
    assert kinds == [("Receipt", None), ("Dispatch", 2)]


def _merged(records: list[FakeMessage]) -> list[FakeMessage]:
    """The reference order: heapq.merge of the runs, as the loop did before it sorted."""
    runs: dict[tuple[str, int], list[FakeMessage]] = {}
    for msg in records:
        runs.setdefault((msg.topic(), msg.partition()), []).append(msg)
    return list(heapq.merge(*runs.values(), key=lambda m: m.timestamp()[1]))


@pytest.mark.parametrize("seed", range(40))
def test_time_order_is_the_merge_of_the_runs_whatever_their_clocks(seed: int) -> None:
    """Ties, runs that interleave, and (every fourth seed) clocks that go back."""
    rng = random.Random(seed)
    backwards = seed % 4 == 0
    records, clock = [], {}
    for offset in range(rng.randrange(1, 300)):
        topic, partition = rng.choice((INTENTS, ATTEMPTS)), rng.randrange(4)
        step = rng.randrange(-3 if backwards else 0, 4)
        clock[(topic, partition)] = clock.get((topic, partition), 0) + step
        records.append(FakeMessage(topic, partition, offset, clock[(topic, partition)],
                                   b"k", b"v"))
    records.sort(key=lambda m: (m.partition(), m.topic()))  # as a fetch hands them over
    assert [id(m) for m in in_time_order(records)] == [id(m) for m in _merged(records)]  # type: ignore[arg-type]


def test_runs_whose_clocks_rise_are_ordered_without_heapq_merge(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``heapq.merge`` is Python, a few µs a record: a poll whose every run rises (the
    usual case) is ordered by a sort instead."""
    records = [FakeMessage(INTENTS, p, o, 10 * o + p, b"k", b"v")
               for p in range(3) for o in range(5)]
    expected = _merged(records)

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("heapq.merge ran")

    monkeypatch.setattr(heapq, "merge", refused)
    assert in_time_order(records) == expected  # type: ignore[arg-type]
