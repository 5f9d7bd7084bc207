"""Reading receipts for one key from its partition only (never the whole topic)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from ledger_stream.domain.events import Receipt
from ledger_stream.kafka.clientlog import CLIENT_LOGGING
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.kafka.message import fetched
from ledger_stream.kafka.offsets import end_offset
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


def key_receipts(bootstrap: str, topic: str, key: str, codec: AvroCodec | None = None,
                 timeout_s: float = 10.0) -> list[Receipt]:
    """Every receipt of ``key`` still in ``topic`` (compaction keeps at least the latest),
    in order. Reads only the key's partition, up to its end at the time of the call."""
    codec = codec or AvroCodec()
    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_LOGGING,
                         "group.id": f"receipts-{uuid.uuid4()}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        tp = key_partition(consumer, topic, key)
        end = end_offset(consumer, tp)
        consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)])
        wanted = key.encode("utf-8")
        found: list[Receipt] = []
        deadline = time.monotonic() + timeout_s
        # The consumer's position, not the last record's offset: transaction markers take
        # offsets that are never delivered.
        while consumer.position([tp])[0].offset < end and time.monotonic() < deadline:
            for msg in fetched(consumer, 500, 0.5):
                if msg.error():
                    continue
                if msg.key() == wanted:
                    try:
                        found.append(codec.decode(msg.value(), expect=(Receipt,)))
                    except DecodeError:
                        continue
        return found
    finally:
        consumer.close()
