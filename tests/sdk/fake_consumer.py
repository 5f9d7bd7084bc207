"""A fake Kafka consumer and its messages, behind the SDK's consumer interface (a fixtures
module: it holds no tests)."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from ledger_stream.domain import events as ev

KEY = "acme/refund/inv-1"


class FakeConsumer:
    """A receipts topic of one partition whose leader is unknown (so learning the leaders
    never succeeds); records are handed over through ``records``."""

    instances: list[FakeConsumer] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.records: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.assigned: list[tuple[float, list[Any]]] = []
        self.fail_assign = 0  # how many incremental_assign calls raise first
        self.learning = threading.Event()  # set at the first list_topics call
        self.high = -1001  # the cached high watermark (librdkafka's "unknown" until set)
        FakeConsumer.instances.append(self)

    def get_watermark_offsets(self, tp: Any, cached: bool = False) -> tuple[int, int]:
        assert cached, "the receipts thread must not make a request per drain"
        return 0, self.high

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.learning.set()
        partition = SimpleNamespace(leader=-1)
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None,
                                                              partitions={0: partition})})

    def incremental_assign(self, tps: list[Any]) -> None:
        if self.fail_assign:
            self.fail_assign -= 1
            raise KafkaException(KafkaError(KafkaError._STATE, "fake"))
        self.assigned.append((time.monotonic(), tps))

    def poll(self, timeout: float) -> Any:
        try:
            return self.records.get(timeout=timeout)
        except queue.Empty:
            return None

    def consume(self, n: int, timeout: float) -> list[Any]:
        return []

    def close(self) -> None:
        pass


def message(key: str, value: bytes, offset: int = 0) -> Any:
    return SimpleNamespace(error=lambda: None, key=lambda: key.encode(), value=lambda: value,
                           headers=lambda: None, partition=lambda: 0, offset=lambda: offset)


def receipt(intent_id: str) -> ev.Receipt:
    return ev.Receipt(receipt_id=uuid.uuid4().hex, key=KEY, intent_event_id=intent_id,
                      status=ev.ReceiptStatus.SUCCEEDED, reason=ev.Reason.NONE,
                      args_hash="h", attempts=1, at_ms=1,
                      key_status=ev.ReceiptStatus.SUCCEEDED)
