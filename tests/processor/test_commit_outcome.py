"""How the group's answer about a batch of unknown outcome is read (unit: a consumer stand-in
for ``committed()``; the real broker: test_commit_outcome_kafka.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ledger_stream.processor import outcome
from ledger_stream.processor.outcome import committed_through

BATCH = [TopicPartition("in", 0, 12, "p-1"), TopicPartition("att", 0, 3, "p-1")]


class Group:
    """Answers ``committed()`` from ``answers`` in turn (an exception is raised)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked = 0

    def committed(self, partitions: list[TopicPartition], timeout: float) -> Any:
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return [TopicPartition(tp.topic, tp.partition, answer.get((tp.topic, tp.partition),
                                                                  -1001))
                for tp in partitions]


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outcome, "BACKOFF_FIRST_S", 0.0)


def test_offsets_equal_to_the_batch_mean_it_committed() -> None:
    group = Group({("in", 0): 12, ("att", 0): 3})
    assert committed_through(group, BATCH, threading.Event()) is True  # type: ignore[arg-type]


def test_the_offsets_before_the_batch_mean_it_did_not() -> None:
    group = Group({("in", 0): 7, ("att", 0): 3})
    assert committed_through(group, BATCH, threading.Event()) is False  # type: ignore[arg-type]


def test_a_failed_fetch_is_asked_again_not_guessed() -> None:
    timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT))
    group = Group(timed_out, timed_out, {("in", 0): 12, ("att", 0): 3})
    assert committed_through(group, BATCH, threading.Event()) is True  # type: ignore[arg-type]
    assert group.asked == 3


def test_a_stop_leaves_the_outcome_unknown() -> None:
    stop = threading.Event()
    stop.set()
    group = Group()
    assert committed_through(group, BATCH, stop) is None  # type: ignore[arg-type]
    assert group.asked == 0


def test_a_batch_without_offsets_cannot_tell() -> None:
    assert committed_through(Group(), [], threading.Event()) is False  # type: ignore[arg-type]


# -- Checkpoint.recover: which abandoned batch asks the group at all -----------------------


class _Delivery:
    """A Delivery stand-in: accepts every record, counts commits and replacements."""

    def __init__(self) -> None:
        self.commits = 0
        self.replaced = 0

    def begin(self) -> None: ...

    def send_all(self, records: Any) -> None:
        list(records)

    def send(self, *args: Any, **kwargs: Any) -> None: ...

    def send_changelog(self, topic: str, partition: int, records: Any) -> None: ...

    def confirm(self) -> dict[int, int]:
        return {}

    def commit(self, offsets: Any, metadata: Any) -> None:
        self.commits += 1

    def replace_producer(self) -> None:
        self.replaced += 1


class _Member(Group):
    """The group as a member that left it sees it: another member owns the partition now
    and committed it, to the very offsets of this member's batch (it read the same
    records)."""

    def __init__(self, member: str, *answers: Any) -> None:
        super().__init__(*answers)
        self.member = member

    def memberid(self) -> str:
        return self.member


def _fenced_batch() -> tuple[Any, Any, Any]:
    from collections import defaultdict

    from ledger_stream.processor.batch import Batch
    from ledger_stream.processor.checkpoint import Checkpoint
    from ledger_stream.state import MemoryPartitionStore
    from tests.factories import intent
    from tests.processor.fakes import ATTEMPTS, INTENTS, PARTITIONS, make_step, record_of

    step = make_step()
    stores = {p: MemoryPartitionStore(p) for p in range(PARTITIONS)}
    batch = Batch(step, stores, {}, (INTENTS, ATTEMPTS), member="m-1")
    batch.add_all([record_of(intent(key="acme/pay/k1"), INTENTS, 0, 1_000)])  # type: ignore[list-item]
    answer = {(tp.topic, tp.partition): tp.offset for tp in batch.offsets()}
    delivery = _Delivery()
    checkpoint = Checkpoint(delivery, _Member("m-2", answer), step,  # type: ignore[arg-type]
                            defaultdict(lambda: "out"), "g", "i")
    return batch, delivery, checkpoint


def test_a_batch_fenced_before_its_commit_began_is_not_taken_for_committed() -> None:
    # The member left the group during the batch: the checkpoint gives up before the commit
    # (nothing of the batch can have committed). If its abort then fails, the producer is
    # replaced; the group's offsets, another member's, must not make the batch count as
    # committed (its overlays written to the stores, its partitions read on).
    from ledger_stream.processor.exceptions import BatchAbandoned

    batch, delivery, checkpoint = _fenced_batch()
    with pytest.raises(BatchAbandoned, match="fenced"):
        checkpoint.run(batch)
    assert delivery.commits == 0
    assert checkpoint.recover(batch, threading.Event()) is False
    assert delivery.replaced == 1
    assert not any(s.changelog_offset for s in batch._stores.values())
