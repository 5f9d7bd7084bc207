"""The processor's loop under incremental (KIP-848) rebalancing, simulated: the real
``Processor._iteration``, ``Assignment``, ``Batch`` and step against a consumer, group and
broker in memory. Rebalance callbacks fire inside ``poll`` and between the records of
``consume``; revokes may take one topic of a partition (held alone) or lose it; partitions
come back after another member advanced their committed offsets; batches are abandoned
(fenced, registry outage); seeks are refused for a partition whose fetch has not started
(librdkafka: Local: Erroneous state). The broker checks every commit: each batch starts
exactly at the committed offset of each partition it read and is contiguous (nothing
decided twice, nothing skipped), and no commit moves an offset it did not read.
"""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from ledger_lab.harness.records import FakeMessage
from ledger_stream.config import Settings
from ledger_stream.domain.policy import Policy
from ledger_stream.processor import assignment as assignment_module
from ledger_stream.processor import runtime
from ledger_stream.processor.assignment import Assignment
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.exceptions import BatchAbandoned, ProcessorError
from ledger_stream.processor.restore import RestoreStats
from ledger_stream.processor.runtime import Processor
from ledger_stream.processor.stages import BatchClock, StageLog
from ledger_stream.processor.ticks import Ticker
from ledger_stream.serde.exceptions import SchemaRegistryUnavailable
from ledger_stream.state import MemoryPartitionStore
from tests.processor.fakes import ATTEMPTS, INTENTS, PARTITIONS, make_step

TOPICS = (INTENTS, ATTEMPTS)


class RecordingBatch(Batch):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.msgs: list[FakeMessage] = []

    def add(self, msg: Any) -> None:
        self.msgs.append(msg)
        super().add(msg)


class Sim:
    """Consumer + group + broker."""

    def __init__(self, rng: random.Random, a: Assignment, *, late_start: float,
                 cb_rate: float, lone_topic: bool) -> None:
        self.rng, self.a = rng, a
        self.late_start, self.cb_rate, self.lone_topic = late_start, cb_rate, lone_topic
        self.logs = {(t, p): 0 for t in TOPICS for p in range(PARTITIONS)}
        self.pos: dict[tuple[str, int], int] = {}      # client's read assignment: next offset
        self.started: set[tuple[str, int]] = set()
        self.paused: set[tuple[str, int]] = set()
        self.group: set[tuple[str, int]] = set()       # what the group gave this member
        self.broker_offsets: dict[tuple[str, int], int] = {}
        self.refused_seeks = 0
        self.callbacks_fired = 0
        self.seeks: list[tuple[str, int, int]] = []

    # -- client ----------------------------------------------------------------------------
    def committed_of(self, key: tuple[str, int]) -> int:
        return self.broker_offsets.get(key, -1001)

    def committed(self, wanted: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.committed_of((tp.topic, tp.partition)))
                for tp in wanted]

    def incremental_assign(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            key = (tp.topic, tp.partition)
            assert key not in self.pos, f"assigned twice {key}"
            self.pos[key] = 0 if tp.offset == OFFSET_BEGINNING else tp.offset
            if self.rng.random() >= self.late_start:
                self.started.add(key)

    def incremental_unassign(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            key = (tp.topic, tp.partition)
            assert key in self.pos, f"unassigned what is not read {key}"
            del self.pos[key]
            self.started.discard(key)
            self.paused.discard(key)

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.pos]

    def pause(self, tps: list[TopicPartition]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in tps}

    def resume(self, tps: list[TopicPartition]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in tps}

    def seek(self, tp: TopicPartition) -> None:
        key = (tp.topic, tp.partition)
        self.seeks.append((tp.topic, tp.partition, tp.offset))
        if key not in self.pos:  # librdkafka: the partition object exists, never started
            raise KafkaException(KafkaError(KafkaError._STATE))
        if key not in self.started:
            self.refused_seeks += 1
            raise KafkaException(KafkaError(KafkaError._STATE))
        self.pos[key] = 0 if tp.offset == OFFSET_BEGINNING else tp.offset

    def memberid(self) -> str:
        return "m1"

    def consumer_group_metadata(self) -> object:
        return object()

    def _next(self) -> FakeMessage | None:
        self._maybe_rebalance()
        ready = [k for k, o in self.pos.items()
                 if k in self.started and k not in self.paused and o < self.logs[k]]
        if not ready:
            return None
        key = self.rng.choice(ready)
        offset = self.pos[key]
        self.pos[key] = offset + 1
        t, p = key
        return FakeMessage(t, p, offset, 1_000 + offset, None, None)  # poison: DLQ'd

    def poll(self, timeout: float) -> FakeMessage | None:
        self.started |= set(self.pos)  # a fetcher started before this poll began
        return self._next()

    def consume(self, n: int, timeout: float) -> list[FakeMessage]:
        out = []
        for _ in range(n):
            m = self._next()
            if m is None:
                break
            out.append(m)
        return out

    # -- group -----------------------------------------------------------------------------
    def _maybe_rebalance(self) -> None:
        while self.rng.random() < self.cb_rate:
            self.callbacks_fired += 1
            r = self.rng.random()
            if r < 0.45 and self.group:
                gone = self.rng.sample(sorted(self.group), self.rng.randint(1, len(self.group)))
                if not self.lone_topic:  # whole partitions
                    gone = [(t, p) for p in {p for _, p in gone} for t in TOPICS
                            if (t, p) in self.group]
                self.group -= set(gone)
                tps = [TopicPartition(t, p) for t, p in gone]
                (self.a.on_lost if self.rng.random() < 0.1 else self.a.on_revoke)(self, tps)
            else:
                free = sorted(set(self.logs) - self.group)
                came = self.rng.sample(free, self.rng.randint(0, len(free))) if free else []
                if not self.lone_topic:
                    came = [(t, p) for p in {p for _, p in came} for t in TOPICS
                            if (t, p) not in self.group]
                # Another member owned what comes now and may have decided some of it.
                for k in came:
                    if self.rng.random() < 0.5:
                        base = max(self.committed_of(k), 0)
                        self.broker_offsets[k] = self.rng.randint(base, self.logs[k])
                self.group |= set(came)
                self.a.on_assign(self, [TopicPartition(t, p) for t, p in came])

    def produce_more(self) -> None:
        for k in self.logs:
            if self.rng.random() < 0.5:
                self.logs[k] += self.rng.randint(1, 4)


class Broker:
    """The checkpoint: checks what each batch commits against the broker's offsets."""

    def __init__(self, sim: Sim, rng: random.Random, abandon_rate: float) -> None:
        self.sim, self.rng, self.abandon_rate = sim, rng, abandon_rate
        self.delivery = SimpleNamespace(abort=lambda: None, replace_producer=lambda: None)
        self.decided: list[tuple[str, int, int]] = []
        self.commits = 0
        self.clock = BatchClock()

    def run(self, batch: RecordingBatch) -> None:
        r = self.rng.random()
        if r < self.abandon_rate / 2:
            raise BatchAbandoned("fenced", "sim: fenced")
        if r < self.abandon_rate:
            raise SchemaRegistryUnavailable("sim: registry down")
        sim, a = self.sim, self.sim.a
        by_key: dict[tuple[str, int], list[int]] = {}
        for m in batch.msgs:
            by_key.setdefault((m.topic(), m.partition()), []).append(m.offset())
        for key, offsets in by_key.items():
            assert key[1] in a.stores, f"decided {key} it does not own"
            assert key in sim.group, f"decided {key} the group did not give"
            start = max(sim.committed_of(key), 0)
            assert offsets[0] >= start, f"DUPLICATE: {key} read {offsets} committed {start}"
            assert offsets[0] == start, f"SKIPPED: {key} read {offsets} committed {start}"
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), \
                f"gap/dup inside batch {key}: {offsets}"
        for tp in batch.offsets():
            key = (tp.topic, tp.partition)
            before = sim.committed_of(key)
            if key in by_key:
                assert tp.offset == by_key[key][-1] + 1
            else:
                assert tp.offset == max(before, -1) or (before < 0 and tp.offset < 0), \
                    f"commit moved {key} it did not read: {before} -> {tp.offset}"
            sim.broker_offsets[key] = tp.offset
        self.decided += [(t, p, o) for (t, p), os in by_key.items() for o in os]
        self.commits += 1
        for p in batch.ticks:  # the Tick comes back as an input
            sim.logs[(ATTEMPTS, p)] += 1


def build(seed: int, *, late_start: float = 0.3, cb_rate: float = 0.08,
          abandon_rate: float = 0.15, lone_topic: bool = True,
          monkeypatch: pytest.MonkeyPatch) -> tuple[Processor, Sim, Broker]:
    rng = random.Random(seed)
    monkeypatch.setattr(assignment_module, "restore_partitions",
                        lambda *args, **kw: RestoreStats())
    monkeypatch.setattr(runtime, "Batch", RecordingBatch)
    monkeypatch.setattr(runtime, "BACKOFF_FIRST_S", 0.0)
    a = Assignment(MemoryPartitionStore, None, Policy(), TOPICS,  # type: ignore[arg-type]
                   "cl", "g", None, incremental=True)  # type: ignore[arg-type]
    sim = Sim(rng, a, late_start=late_start, cb_rate=cb_rate, lone_topic=lone_topic)
    broker = Broker(sim, rng, abandon_rate)
    p = Processor.__new__(Processor)
    # model_copy: a session far below the floor Settings accepts, so the test runs fast
    p.settings = Settings(max_batch=4).model_copy(update={"session_timeout_ms": 20})
    p._consumer = sim  # type: ignore[assignment]
    p._assignment = a
    p._inputs = TOPICS
    p._step = make_step()
    p._checkpoint = broker  # type: ignore[assignment]
    p._ticker = Ticker(0 if rng.random() < 0.3 else 10**9)
    p._stages = StageLog()
    p._stop = threading.Event()
    p._backoff_s = 0.0
    p._fetching_epoch, p._fetching = 0, set()
    return p, sim, broker


def drive(p: Processor, sim: Sim, rounds: int) -> str | None:
    for _ in range(rounds):
        sim.produce_more()
        try:
            p._iteration()
        except ProcessorError as exc:
            return str(exc)
    return None


@pytest.mark.parametrize("seed", range(120))
def test_nothing_is_decided_twice_or_skipped(seed: int, monkeypatch: pytest.MonkeyPatch):
    p, sim, broker = build(seed, monkeypatch=monkeypatch)
    # A ProcessorError ends the run cleanly: a restart reads on from the committed offsets,
    # which the broker checked up to there.
    drive(p, sim, 60)


@pytest.mark.parametrize("late_start", [0.3, 0.7])
def test_a_seek_refused_before_the_fetch_starts_never_ends_the_processor(
        late_start: float, monkeypatch: pytest.MonkeyPatch):
    """A partition assigned by the last rebalance whose fetch has not started refuses a seek;
    it starts at its committed offset anyway. Counting that as a failed rewind ended the
    processor ("cannot rewind a new assignment") in 8 of 300 runs (12 with later starts)."""
    ended = []
    for seed in range(300):
        with monkeypatch.context() as m:
            p, sim, _ = build(seed, late_start=late_start, monkeypatch=m)
            why = drive(p, sim, 60)
            if why is not None:
                ended.append((seed, why))
    assert ended == []


def test_a_refused_seek_of_a_partition_the_client_does_not_hold_is_not_a_rewind(
        monkeypatch: pytest.MonkeyPatch):
    """librdkafka answers "Erroneous state" for a subscribed topic's partition it was never
    given, too; only one it holds counts as rewound."""
    p, sim, _ = build(0, monkeypatch=monkeypatch)
    a = p._assignment
    a.on_assign(sim, [TopicPartition(t, 0) for t in TOPICS])
    sim.group |= {(t, 0) for t in TOPICS}
    sim.started -= {(t, 0) for t in TOPICS}
    assert p._rewind([0])  # assigned, fetch not started: refused, and counted as rewound
    assert sim.refused_seeks == 2
    sim.incremental_unassign([TopicPartition(t, 0) for t in TOPICS])  # the client let go
    assert not p._rewind([0])


def test_the_simulation_decides_across_rebalances(monkeypatch: pytest.MonkeyPatch):
    decided = callbacks = restarts = 0
    for seed in range(20):
        with monkeypatch.context() as m:
            p, sim, broker = build(seed, monkeypatch=m)
            drive(p, sim, 60)
            decided += len(broker.decided)
            callbacks += sim.callbacks_fired
            restarts += len(sim.seeks)
    assert decided > 500 and callbacks > 100 and restarts > 50, (decided, callbacks, restarts)


def test_a_restart_after_the_poll_would_decide_records_twice(monkeypatch: pytest.MonkeyPatch):
    """Why ``_restart_fetching`` comes first in ``_iteration``: run after ``_collect``, it
    seeks behind records already polled into the batch, and the simulation catches the
    second decision of them."""
    original = Processor._collect

    def collect_then_restart(self: Processor) -> Any:
        got = original(self)
        self._fetching_epoch = -1  # force a restart now, behind what was just polled
        self._fetching = set(self._assignment.owned)
        Processor._restart_fetching(self)
        return got

    caught = 0
    for seed in range(40):
        with monkeypatch.context() as m:
            p, sim, _ = build(seed, monkeypatch=m)
            m.setattr(Processor, "_collect", collect_then_restart)
            try:
                drive(p, sim, 60)
            except AssertionError as exc:
                assert "DUPLICATE" in str(exc) or "gap/dup" in str(exc), exc
                caught += 1
    assert caught > 0
