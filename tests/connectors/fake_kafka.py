"""The Kafka clients of a ``ConnectorWorker`` without a broker, behind confluent-kafka's
interface (the one ``ledger_lab/bench/connector_cpu.py`` drives the loop through): records
are handed out by ``poll``, an asynchronous commit is answered through the consumer's
``on_commit`` only from inside a later ``poll`` or ``consume`` (as librdkafka serves it),
and a produce is acknowledged at the producer's next ``poll``. Commit answers of chosen
partitions can be withheld, and hooks run inside the poll that hands a record over (a
SIGTERM arriving there)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from ledger_lab.harness.records import FakeMessage


class FakeConsumer:
    def __init__(self, config: dict[str, Any], topic: str, partitions: int = 2) -> None:
        self.on_commit: Callable[[KafkaError | None, list[TopicPartition]], None] = \
            config["on_commit"]
        self.topic, self.partitions = topic, partitions
        self._lock = threading.Lock()
        self._records: deque[FakeMessage] = deque()
        self._answers: deque[tuple[KafkaError | None, list[TopicPartition]]] = deque()
        self._withheld: list[tuple[KafkaError | None, list[TopicPartition]]] = []
        self._next = [0] * partitions
        self._on_assign: Callable[..., None] | None = None
        self.hold: set[int] = set()  # partitions whose commit answers are withheld
        self.refuse: set[int] = set()  # partitions whose commits are answered refused
        self.commits: list[tuple[int, int, bool]] = []  # (partition, offset, asynchronous)
        self.in_poll: list[Callable[[], None]] = []  # run once, by a poll returning a record
        self.polls = 0

    # --- what the test does ---

    def append(self, partition: int, value: bytes) -> int:
        with self._lock:
            offset = self._next[partition]
            self._next[partition] += 1
            self._records.append(FakeMessage(self.topic, partition, offset,
                                             int(time.time() * 1000), None, value))
            return offset

    def release(self) -> None:
        """Let the withheld commit answers through (served by the next poll)."""
        with self._lock:
            self.hold.clear()
            self._answers.extend(self._withheld)
            self._withheld.clear()

    def asked(self, partition: int) -> list[tuple[int, bool]]:
        return [(o, a) for p, o, a in self.commits if p == partition]

    # --- confluent_kafka.Consumer ---

    def subscribe(self, topics: list[str], on_assign: Callable[..., None],
                  **_: Any) -> None:
        self._on_assign = on_assign

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, 0  # nothing before the assignment: every record is live

    def _serve(self) -> None:
        if self._on_assign is not None:
            assign, self._on_assign = self._on_assign, None
            assign(self, [TopicPartition(self.topic, p) for p in range(self.partitions)])
        while True:
            with self._lock:
                if not self._answers:
                    return
                err, tps = self._answers.popleft()
            self.on_commit(err, tps)

    def poll(self, timeout: float) -> FakeMessage | None:
        self.polls += 1
        self._serve()
        with self._lock:
            record = self._records.popleft() if self._records else None
        if record is None:
            time.sleep(min(timeout, 0.005))
        while record is not None and self.in_poll:
            self.in_poll.pop(0)()
        return record

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        self._serve()
        with self._lock:
            got = list(self._records)[:num_messages]
            for _ in got:
                self._records.popleft()
            return got

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> Any:
        with self._lock:
            self.commits += [(tp.partition, tp.offset, asynchronous) for tp in offsets]
            if not asynchronous:
                return offsets
            answered = [TopicPartition(self.topic, tp.partition, tp.offset) for tp in offsets]
            refused = any(tp.partition in self.refuse for tp in offsets)
            answer = (KafkaError(KafkaError.ILLEGAL_GENERATION) if refused else None, answered)
            if any(tp.partition in self.hold for tp in offsets):
                self._withheld.append(answer)
            else:
                self._answers.append(answer)
            return None

    def seek(self, tp: TopicPartition) -> None:
        pass

    def close(self) -> None:
        pass


class FakeProducer:
    """Every produce acknowledged at the next ``poll`` or ``flush``; ``in_poll`` hooks run
    inside the next poll that has a report to serve, before it."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self._pending: list[Callable[..., None]] = []
        self.in_poll: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def produce(self, topic: str, value: bytes, key: bytes,
                on_delivery: Callable[..., None], **_: Any) -> None:
        with self._lock:
            self.sent.append(value)
            self._pending.append(on_delivery)

    def poll(self, timeout: float = 0) -> int:
        with self._lock:
            pending, self._pending = self._pending, []
        if pending:
            while self.in_poll:
                self.in_poll.pop(0)()
        for on_delivery in pending:
            on_delivery(None, None)
        return len(pending)

    def flush(self, timeout: float = 0) -> int:
        self.poll(0)
        return 0
