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
        if isinstance(answer, list):  # partitions as given, each with its own error
            return answer
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


def test_a_partition_answered_with_an_error_is_asked_again_not_guessed() -> None:
    from types import SimpleNamespace

    failed = [SimpleNamespace(topic="in", partition=0, offset=-1001,  # as the client gives it
                              error=KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)),
              SimpleNamespace(topic="att", partition=0, offset=3, error=None)]
    group = Group(failed, {("in", 0): 12, ("att", 0): 3})
    assert committed_through(group, BATCH, threading.Event()) is True  # type: ignore[arg-type]
    assert group.asked == 2


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
        self.fail: dict[str, Any] = {}  # a step's name -> the BatchAbandoned it raises

    def _step(self, name: str) -> None:
        if name in self.fail:
            raise self.fail.pop(name)

    def begin(self) -> None: ...

    def send_all(self, records: Any) -> None:
        list(records)

    def send(self, *args: Any, **kwargs: Any) -> None: ...

    def send_changelog(self, topic: str, partition: int, records: Any) -> None: ...

    def confirm(self) -> dict[int, int]:
        self._step("confirm")
        return {}

    def commit(self, offsets: Any, metadata: Any) -> None:
        self._step("commit")
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


def _batch(step: Any, stores: Any) -> Any:
    """A batch of one intent, polled by member m-1."""
    from ledger_stream.processor.batch import Batch
    from tests.factories import intent
    from tests.processor.fakes import ATTEMPTS, INTENTS, record_of

    batch = Batch(step, stores, {}, (INTENTS, ATTEMPTS), member="m-1")
    batch.add_all([record_of(intent(key="acme/pay/k1", event_id="i-1"),  # type: ignore[list-item]
                             INTENTS, 0, 1_000)])
    return batch


def _fenced_batch(member: str = "m-2") -> tuple[Any, Any, Any]:
    """A batch, its delivery and a checkpoint whose consumer is ``member`` and whose group
    answers the batch's own offsets (m-2: another member committed them)."""
    from collections import defaultdict

    from ledger_stream.processor.checkpoint import Checkpoint
    from ledger_stream.state import MemoryPartitionStore
    from tests.processor.fakes import PARTITIONS, make_step

    step = make_step()
    batch = _batch(step, {p: MemoryPartitionStore(p) for p in range(PARTITIONS)})
    answer = {(tp.topic, tp.partition): tp.offset for tp in batch.offsets()}
    delivery = _Delivery()
    checkpoint = Checkpoint(delivery, _Member(member, answer), step,  # type: ignore[arg-type]
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


def test_a_batch_whose_offsets_the_group_refused_is_not_taken_for_committed() -> None:
    # The group moved on during the commit (a stale generation or member epoch): the
    # offsets were refused, so the transaction cannot commit. If its abort then fails (a new
    # producer), the group's offsets, another member's, say nothing about this batch.
    from ledger_stream.processor.exceptions import BatchAbandoned

    batch, delivery, checkpoint = _fenced_batch(member="m-1")
    delivery.fail["commit"] = BatchAbandoned("fenced", "fenced: the group moved on",
                                             await_rebalance=True)
    with pytest.raises(BatchAbandoned, match="moved on"):
        checkpoint.run(batch)
    assert checkpoint.recover(batch, threading.Event()) is False
    assert not any(s.changelog_offset for s in batch._stores.values())


def test_a_batch_abandoned_before_its_commit_asks_nothing_of_the_group() -> None:
    # An earlier batch's commit failed outright (its outcome known: the abort went through,
    # no new producer); the same records decided again are abandoned before their commit,
    # with a new producer. That batch is not the one whose commit began: not asked about.
    from ledger_stream.processor.exceptions import BatchAbandoned

    first, delivery, checkpoint = _fenced_batch(member="m-1")
    delivery.fail["commit"] = BatchAbandoned("aborted", "transaction aborted")
    with pytest.raises(BatchAbandoned, match="aborted"):
        checkpoint.run(first)
    again = _batch(first._step, first._stores)
    delivery.fail["confirm"] = BatchAbandoned("delivery", "fatal", new_producer=True)
    with pytest.raises(BatchAbandoned, match="fatal"):
        checkpoint.run(again)
    group = checkpoint._consumer
    assert checkpoint.recover(again, threading.Event()) is False
    assert group.asked == 0


@pytest.mark.parametrize("stopped", [False, True])
def test_a_stuck_commit_that_went_through_keeps_the_batch_unless_stopped(
        stopped: bool) -> None:
    # The commit gave up on (its producer replaced) went through: the group has the batch's
    # offsets and its overlays go to the stores. A stop that comes during the replacement
    # leaves the outcome unknown: nothing written (a restart restores from the changelog).
    from ledger_stream.processor.exceptions import BatchAbandoned

    batch, delivery, checkpoint = _fenced_batch(member="m-1")
    delivery.fail["commit"] = BatchAbandoned("producer_wedged", "stuck", new_producer=True)
    with pytest.raises(BatchAbandoned, match="stuck"):
        checkpoint.run(batch)
    stop = threading.Event()
    if stopped:
        delivery.replace_producer = stop.set  # type: ignore[method-assign]
    assert checkpoint.recover(batch, stop) is not stopped
    written = [p for p, s in batch._stores.items() if s.changelog_offset]
    assert written == ([] if stopped else sorted(batch.overlays))
