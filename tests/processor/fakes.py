"""In-memory stand-ins for the processor's unit tests: records as the consumer returns
them, and a step with the default codec and policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.step import LedgerStep
from ledger_stream.serde import AvroCodec

INTENTS, ATTEMPTS = "t.intents", "t.attempts"
PARTITIONS = 3
CODEC = AvroCodec()


def make_step(policy: Policy | None = None) -> LedgerStep:
    return LedgerStep(policy or Policy(), CODEC, {INTENTS: "intents", ATTEMPTS: "attempts"},
                      PARTITIONS)


@dataclass
class FakeMessage:
    """The parts of ``confluent_kafka.Message`` the batch reads."""

    _topic: str
    _partition: int
    _offset: int
    _timestamp: int
    _key: bytes | None
    _value: bytes | None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_LOG_APPEND_TIME, self._timestamp

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def record_of(event: Any, topic: str, offset: int, timestamp: int,
              partition: int | None = None) -> FakeMessage:
    key = event.key.encode()
    home = partition_for(key, PARTITIONS) if partition is None else partition
    return FakeMessage(topic, home, offset, timestamp, key, CODEC.encode(event))
