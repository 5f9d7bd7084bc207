"""Reading ledger topics from the beginning, for tools and tests (not the hot path)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, Message, TopicPartition

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.exceptions import KafkaSetupError, kafka_error_text
from ledger_stream.kafka.message import fetched, position
from ledger_stream.kafka.offsets import log_bounds
from ledger_stream.serde import AvroCodec


def read_topic(
    bootstrap: str,
    topic: str,
    codec: AvroCodec | None = None,
    *,
    until: Callable[[list[Any]], bool] | None = None,
    timeout_s: float = 30.0,
    raw: bool = False,
    convert: Callable[[Message], Any] | None = None,
) -> list[Any]:
    """Every record of ``topic`` up to its end (or until ``until(records)`` holds).

    Returns decoded events, or (key, value) byte pairs with ``raw``, or what ``convert``
    makes of each record. With ``until``, keeps reading new records until the predicate
    holds or ``timeout_s`` passes.
    """
    codec = codec or AvroCodec()
    if convert is None:
        convert = (lambda m: (m.key(), m.value())) if raw else (
            lambda m: codec.decode(m.value()))
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            **CLIENT_CONFIG,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        parts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
        consumer.assign(parts)
        ends = {p: end for p, (_, end) in log_bounds(bootstrap, topic,
                                                      list(meta.partitions)).items()}
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if until is None and _at_end(consumer, topic, ends):
                break
            if until is not None and until(records):
                break
            for msg in fetched(consumer, 500, 0.2):
                if msg.error():
                    continue
                records.append(convert(msg))
        return records
    finally:
        consumer.close()


def _at_end(consumer: Consumer, topic: str, ends: dict[int, int]) -> bool:
    """Positions, not last offsets: transaction markers take offsets never delivered."""
    positions = consumer.position([TopicPartition(topic, p) for p in ends])
    return all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in positions)


def tail_topic(bootstrap: str, topic: str, *, follow: bool,
               stop: threading.Event | None = None, poll_s: float = 0.5,
               timeout_s: float = 60.0) -> Iterator[tuple[int, int, bytes | None]]:
    """(partition, offset, value) of every committed record of ``topic`` from the beginning,
    in offset order per partition; with ``follow``, then every new one until ``stop`` is set.
    Without ``follow``, KafkaSetupError when the end is not reached within ``timeout_s``
    (never a silently partial answer), and when Kafka does not answer (the client's text).
    Nothing is committed."""
    try:
        yield from _tail(bootstrap, topic, follow, stop or threading.Event(), poll_s, timeout_s)
    except KafkaException as exc:
        raise KafkaSetupError(
            f"cannot read {topic} from Kafka at {bootstrap}: {kafka_error_text(exc)}") from exc


def _tail(bootstrap: str, topic: str, follow: bool, stop: threading.Event, poll_s: float,
          timeout_s: float) -> Iterator[tuple[int, int, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "group.id": f"tail-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        known_by = time.monotonic() + 10.0  # a topic just created may take a moment to show
        while meta.error is not None and time.monotonic() < known_by:
            time.sleep(0.2)
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
        if meta.error is not None:
            raise KafkaSetupError(f"cannot read {topic}: {meta.error.str()}")
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
        bounds = log_bounds(bootstrap, topic, list(meta.partitions))
        ends = {p: end for p, (_, end) in bounds.items()}
        # A partition whose records were all deleted (retention) is at its end already: the
        # consumer has no position there until something new arrives.
        empty = {p for p, (start, end) in bounds.items() if start >= end}
        deadline = time.monotonic() + timeout_s
        while not stop.is_set():
            if not follow and _at_end(consumer, topic, {p: e for p, e in ends.items()
                                                         if p not in empty}):
                return
            if not follow and time.monotonic() > deadline:
                raise KafkaSetupError(f"read {topic} not to its end within {timeout_s:g} s")
            for msg in fetched(consumer, 500, poll_s):
                if msg.error():
                    continue
                _, partition, offset = position(msg)
                yield partition, offset, msg.value()
    finally:
        consumer.close()
