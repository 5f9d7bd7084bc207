"""Offsets that survive leader elections."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def end_offset(consumer: Consumer, tp: TopicPartition, timeout_s: float = 15.0) -> int:
    """The partition's end offset, retried through leader elections (a new topic, a broker
    restart) until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return int(consumer.get_watermark_offsets(tp, timeout=5)[1])
        except KafkaException:
            # NOT_LEADER / LEADER_NOT_AVAILABLE right after topic creation or a broker
            # restart are not flagged retriable by librdkafka here, yet pass in moments.
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
