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
