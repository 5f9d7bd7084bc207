"""The benchmark's topics and the two measurements every Kafka arm shares.

Output topics are created with ``message.timestamp.type=LogAppendTime``: the broker stamps
each record when it appends it, so the span from an arm's first to its last output record
is measured by one clock, with nothing reading the topic while the arm runs. (The processor
forwards each input's timestamp to its outputs, so CreateTime would say nothing.)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic

from ledger_lab.bench.exceptions import BenchError
from ledger_stream.config import Settings
from ledger_stream.kafka.clients import Consumer, Producer
from ledger_stream.kafka.message import fetched
from ledger_stream.kafka.offsets import committed_offsets, end_offset
from ledger_stream.kafka.producer import producer_config
from ledger_stream.kafka.topics import create_topics, ledger_topics, require_matching

LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class Span:
    """Records found in an output topic after given offsets, and their append-time span."""

    count: int
    first_ms: int
    last_ms: int

    @property
    def seconds(self) -> float:
        return max(self.last_ms - self.first_ms, 1) / 1000

    def rate(self) -> float:
        """Records per second between the first and the last append (count - 1 intervals)."""
        return (self.count - 1) / self.seconds if self.count > 1 else 0.0


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})


def create_ledger_topics(bootstrap: str, settings: Settings) -> None:
    """The six ledger topics of ``settings.topic_prefix``, receipts stamped at append."""
    specs = [
        NewTopic(s.name, s.partitions, s.replication_factor,
                 config={**s.config, **(LOG_APPEND_TIME if s.name.endswith(".receipts") else {})})
        for s in ledger_topics(settings)
    ]
    _create(bootstrap, specs)
    require_matching(create_topics(bootstrap, settings))  # the project's own check


def create_plain_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    """Topics for the echo arms: ``partitions`` partitions, stamped at append."""
    _create(bootstrap, [NewTopic(n, partitions, 1, config=dict(LOG_APPEND_TIME)) for n in names])


def delete_topics(bootstrap: str, names: Sequence[str]) -> None:
    if not names:
        return
    client = admin(bootstrap)  # must outlive the futures
    for future in client.delete_topics(list(names), operation_timeout=30).values():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise BenchError(f"deleting benchmark topics failed: {exc}") from exc


def topics_named(bootstrap: str, fragment: str) -> list[str]:
    return [t for t in admin(bootstrap).list_topics(timeout=10).topics if fragment in t]


def write_records(bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes]]) -> int:
    """Produce ``records`` (key, value) with the ledger's partitioner; return the count."""
    producer = Producer(producer_config(bootstrap, **{"linger.ms": 20}))
    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
    if producer.flush(60):
        raise BenchError(f"writing {topic}: records left unacknowledged after 60 s")
    return count


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = _consumer(bootstrap)
    try:
        return _ends(consumer, topic)
    finally:
        consumer.close()


def read_span(bootstrap: str, topic: str, start: dict[int, int], expected: int,
              timeout_s: float = 60.0) -> Span:
    """The first ``expected`` committed records of ``topic`` after ``start``, with their
    append times. Raises BenchError when fewer arrive within ``timeout_s``."""
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([TP(topic, p, o) for p, o in start.items()])
        count, first, last = 0, 2**63, 0
        deadline = time.monotonic() + timeout_s
        while count < expected and time.monotonic() < deadline:
            for msg in fetched(consumer, 1000, 0.5):
                if msg.error():
                    continue
                count += 1
                stamp = msg.timestamp()[1]
                first, last = min(first, stamp), max(last, stamp)
        if count < expected:
            raise BenchError(f"{topic}: {count} of {expected} records after the arm ran")
        return Span(count, first, last)
    finally:
        consumer.close()


class CommitWatcher:
    """How far a consumer group got on a topic: the sum of its committed offsets. One
    client for many looks (it never joins the group)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self._consumer = _consumer(bootstrap, group)
        self._parts = [TP(topic, p) for p in _ends(self._consumer, topic)]
        self._last = 0

    def committed(self) -> int:
        """The sum of the committed offsets; while the group's coordinator moves or loads
        (a loaded broker answers NOT_COORDINATOR for a moment), the last sum seen: the
        caller polls again."""
        try:
            found = committed_offsets(self._consumer, self._parts, 10)
        except KafkaException:
            return self._last  # the coordinator still moving: the caller polls again
        self._last = sum(max(tp.offset, 0) for tp in found)
        return self._last

    def close(self) -> None:
        self._consumer.close()


def _ends(consumer: Consumer, topic: str) -> dict[int, int]:
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    return {p: end_offset(consumer, TP(topic, p)) for p in meta.partitions}


def _consumer(bootstrap: str, group: str | None = None) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": group or f"bench-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "auto.offset.reset": "earliest", "log_level": 4,
    })


def _create(bootstrap: str, specs: list[NewTopic], timeout_s: float = 30.0) -> None:
    """Create ``specs`` and wait until the metadata shows every partition with a leader: a
    consumer that subscribes earlier may not look again for minutes."""
    client = admin(bootstrap)  # must outlive the futures
    futures = client.create_topics(specs, operation_timeout=30, request_timeout=30)
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BenchError(f"creating {name} failed: {exc.args[0].str()}") from exc
    deadline = time.monotonic() + timeout_s
    wanted = {spec.topic: spec.num_partitions for spec in specs}
    while time.monotonic() < deadline:
        found = client.list_topics(timeout=10).topics
        if all(name in found and len(found[name].partitions) >= count and
               all(p.leader >= 0 for p in found[name].partitions.values())
               for name, count in wanted.items()):
            return
        time.sleep(0.1)
    raise BenchError(f"topics {sorted(wanted)} not ready after {timeout_s:.0f} s")

