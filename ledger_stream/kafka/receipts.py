"""Reading one key's records (its receipts, or any ledger topic's) from its partition only
(never the whole topic)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from ledger_stream.domain.events import Receipt
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.kafka.message import fetched, position
from ledger_stream.kafka.offsets import watermarks
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.serde import AvroCodec, DecodeError


def key_partition(consumer: Consumer, topic: str, key: str,
                  patience_s: float = 10.0) -> TopicPartition:
    """The key's partition of ``topic``. A topic just created may take a moment to show in
    metadata; KafkaSetupError when it does not within ``patience_s``."""
    deadline = time.monotonic() + patience_s
    while True:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        if meta.error is None and meta.partitions:
            return TopicPartition(topic, partition_for(key, len(meta.partitions)))
        if time.monotonic() > deadline:
            raise KafkaSetupError(f"{topic} is not available ({meta.error}): run "
                                  "`ledger-stream topics create` with the same settings")
        time.sleep(0.2)


@dataclass(frozen=True)
class KeyRecord:
    """One record of a key, where the log has it."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int  # the record's timestamp (LogAppendTime on the input topics)
    value: bytes | None
    key: bytes | None = None


def key_records(bootstrap: str, topic: str, key: str, timeout_s: float = 10.0
                ) -> list[KeyRecord]:
    """Every committed record of ``key`` still in ``topic``, in offset order. Reads only the
    key's partition, up to its end at the time of the call; KafkaSetupError when the end is
    not reached within ``timeout_s`` (never a silently partial answer)."""
    wanted = key.encode("utf-8")
    return partition_records(bootstrap, topic, lambda consumer: key_partition(
        consumer, topic, key).partition, lambda k: k == wanted, timeout_s)


def partition_records(bootstrap: str, topic: str, partition: Callable[[Consumer], int],
                      wanted: Callable[[bytes | None], bool], timeout_s: float = 10.0
                      ) -> list[KeyRecord]:
    """The committed records of one partition of ``topic`` whose key is ``wanted``, in
    offset order, up to the partition's end at the time of the call (KafkaSetupError when
    it is not reached within ``timeout_s``). ``partition`` picks it, given the consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "group.id": f"key-{uuid.uuid4()}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        tp = TopicPartition(topic, partition(consumer))
        start, end = watermarks(consumer, tp)
        found: list[KeyRecord] = []
        if start >= end:  # empty, or everything before the end deleted
            return found
        consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        # The consumer's position, not the last record's offset: transaction markers take
        # offsets that are never delivered. Before the first fetch it has none (negative).
        while (reached := consumer.position([tp])[0].offset) < end:
            if time.monotonic() > deadline:
                raise KafkaSetupError(f"read {topic}[{tp.partition}] only up to offset "
                                      f"{reached} of {end} within {timeout_s:g} s")
            for msg in fetched(consumer, 500, 0.5):
                if msg.error() or not wanted(msg.key()):
                    continue
                _, at, offset = position(msg)
                found.append(KeyRecord(topic, at, offset, msg.timestamp()[1], msg.value(),
                                       msg.key()))
        return found
    finally:
        consumer.close()


def key_receipts(bootstrap: str, topic: str, key: str, codec: AvroCodec | None = None,
                 timeout_s: float = 10.0) -> list[Receipt]:
    """Every receipt of ``key`` still in ``topic`` (compaction keeps at least the latest),
    in order (records that are not receipts skipped)."""
    codec = codec or AvroCodec()
    found: list[Receipt] = []
    for record in key_records(bootstrap, topic, key, timeout_s):
        try:
            found.append(codec.decode(record.value, expect=(Receipt,)))
        except DecodeError:
            continue
    return found
