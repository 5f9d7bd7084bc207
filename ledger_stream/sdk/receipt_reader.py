"""Following one key's receipts, from before the intent was produced.

The reader captures the end offset of the key's receipts partition *before* the intent is
produced and reads that one partition from there, so it cannot miss the answer (which is
written after the intent) and never reads other partitions.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from ledger_stream.domain.events import Receipt
from ledger_stream.kafka.offsets import end_offset
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.serde import AvroCodec, DecodeError


class KeyReceiptReader:
    def __init__(self, bootstrap: str, topic: str, key: str, partitions: int,
                 codec: AvroCodec) -> None:
        self._key = key.encode("utf-8")
        self._codec = codec
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"ledger-sdk-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 20,
        })
        tp = TopicPartition(topic, partition_for(key, partitions))
        end = end_offset(self._consumer, tp)
        self._consumer.assign([TopicPartition(topic, tp.partition, end)])

    def read(self, timeout_s: float) -> list[Receipt]:
        """Receipts of the key that arrived within ``timeout_s`` (may be empty)."""
        found: list[Receipt] = []
        deadline = time.monotonic() + timeout_s
        while not found and (left := deadline - time.monotonic()) > 0:
            for msg in self._consumer.consume(100, timeout=min(left, 0.5)):
                if msg.error() or msg.key() != self._key:
                    continue
                try:
                    found.append(self._codec.decode(msg.value(), expect=(Receipt,)))
                except DecodeError:
                    continue
        return found

    def close(self) -> None:
        self._consumer.close()
