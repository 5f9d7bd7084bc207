"""In-memory stand-ins for the processor's unit tests: records as the consumer returns
them, and a step with the default codec and policy."""

from __future__ import annotations

from typing import Any

from ledger_lab.harness.records import FakeMessage
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


def record_of(event: Any, topic: str, offset: int, timestamp: int,
              partition: int | None = None) -> FakeMessage:
    key = event.key.encode()
    home = partition_for(key, PARTITIONS) if partition is None else partition
    return FakeMessage(topic, home, offset, timestamp, key, CODEC.encode(event))


class OneKey:
    """The StateView of a partition holding nothing yet."""

    def __init__(self) -> None:
        from ledger_stream.domain.containment import NONE
        from ledger_stream.domain.state import absent

        self._absent, self.containment = absent, lambda: NONE
        self.states: dict[str, object] = {}

    def state(self, key: str):  # type: ignore[no-untyped-def]
        return self.states.get(key) or self._absent(key)

    def put(self, key: str, before: object, after: object, row: bytes) -> None:
        self.states[key] = after
