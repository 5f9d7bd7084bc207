"""After the callbacks of an incremental rebalance, the processor restarts reading the
partitions it kept from their committed offsets: librdkafka resumes them without waking its
fetcher (up to a second of no records), and a seek wakes it. A recording consumer, no
broker; the pause itself is measured by ``python -m ledger_lab.bench.rebalance_pause``,
and tests/processor/test_incremental_simulation.py checks that no record is decided twice
or skipped."""

from __future__ import annotations

from types import SimpleNamespace

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from ledger_stream.processor.changelog import Positions
from ledger_stream.processor.runtime import Processor

INPUTS = ("ledger.intents", "ledger.attempts")


class SeekingConsumer:
    def __init__(self) -> None:
        self.seeks: list[tuple[str, int, int]] = []

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.topic, tp.partition, tp.offset))


def processor(incremental: bool) -> Processor:
    p = Processor.__new__(Processor)
    p._assignment = SimpleNamespace(  # type: ignore[assignment]
        incremental=incremental, epoch=0, owned=[3, 7],
        committed={3: Positions(10, 4), 7: Positions(-1, 2)})
    p._consumer = SeekingConsumer()  # type: ignore[assignment]
    p._inputs = INPUTS
    p._fetching_epoch, p._fetching = 0, set()
    return p


def test_a_rebalance_restarts_each_kept_partition_once_from_its_committed_offsets():
    p = processor(incremental=True)
    a, seeks = p._assignment, p._consumer.seeks  # type: ignore[attr-defined]
    p._restart_fetching()
    assert seeks == []  # no callback since the last restart
    a.epoch = 1  # the first assignment: nothing was kept, and new partitions need no seek
    p._restart_fetching()
    assert seeks == []
    a.epoch, a.owned = 3, [3, 7, 9]  # a revoke and an assign: 9 is new, 3 and 7 were kept
    a.committed[9] = Positions(5, 5)
    p._restart_fetching()
    assert sorted(seeks) == [("ledger.attempts", 3, 4), ("ledger.attempts", 7, 2),
                             ("ledger.intents", 3, 10), ("ledger.intents", 7, OFFSET_BEGINNING)]
    p._restart_fetching()
    assert len(seeks) == 4  # once per rebalance, not per batch


def test_eager_rebalancing_restarts_nothing():
    # Eager: every partition is assigned anew from its committed offsets anyway.
    p = processor(incremental=False)
    p._assignment.epoch = 2
    p._restart_fetching()
    assert p._consumer.seeks == []  # type: ignore[attr-defined]
