"""Committed offsets read through a moving group coordinator (kafka/offsets.py), against a
fake consumer: NOT_COORDINATOR for a moment is waited out; one that lasts past the limit is
raised, not turned into "nothing committed"."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ledger_stream.kafka.offsets import committed_offsets

pytestmark = pytest.mark.timeout(30)


class MovingCoordinator:
    """Answers NOT_COORDINATOR ``refusals`` times, then offset 7 for every partition."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.asked = 0

    def committed(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.asked += 1
        if self.asked <= self.refusals:
            raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))
        return [TopicPartition(tp.topic, tp.partition, 7) for tp in tps]


def test_a_coordinator_that_moves_for_a_moment_is_waited_out() -> None:
    consumer: Any = MovingCoordinator(refusals=3)
    found = committed_offsets(consumer, [TopicPartition("t", 0), TopicPartition("t", 1)], 10)
    assert [(tp.partition, tp.offset) for tp in found] == [(0, 7), (1, 7)]
    assert consumer.asked == 4


def test_a_coordinator_that_stays_away_is_an_error() -> None:
    consumer: Any = MovingCoordinator(refusals=10**6)
    with pytest.raises(KafkaException):
        committed_offsets(consumer, [TopicPartition("t", 0)], 0.5)
