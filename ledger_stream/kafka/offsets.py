"""Offsets that survive leader elections."""

from __future__ import annotations

import contextlib
import threading
import time

from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ledger_stream.kafka.client_config import CLIENT_CONFIG


def learn_leaders(client: Consumer, topic: str, timeout_s: float = 5.0,
                  stop: threading.Event | None = None) -> bool:
    """Have ``client`` learn ``topic``'s partition leaders now (True once it has), so its
    first fetch or offset lookup goes straight to them.

    A new client's first request for a topic can be lost: librdkafka sends it on the
    bootstrap connection, drops that connection once it learns the broker's own address,
    and asks again only at its next metadata refresh, about a second later. A processor that
    restores right after it starts (a lone member joins its group at once) waited that
    second before its first changelog record in about one restore in three (the bench's
    restore arm). Best effort: False after ``timeout_s`` (or once ``stop`` is set), and the
    caller asks anyway."""
    deadline = time.monotonic() + timeout_s
    pause = stop or threading.Event()
    while True:
        with contextlib.suppress(KafkaException):
            found = client.list_topics(topic, timeout=min(2.0, timeout_s)).topics.get(topic)
            if found is not None and found.error is None and found.partitions and all(
                    p.leader >= 0 for p in found.partitions.values()):
                return True
        if time.monotonic() > deadline or pause.wait(0.05):
            return False


def end_offset(consumer: Consumer, tp: TopicPartition, timeout_s: float = 15.0) -> int:
    """The partition's end offset, retried through leader elections (a new topic, a broker
    restart) until ``timeout_s``."""
    return watermarks(consumer, tp, timeout_s)[1]


def watermarks(consumer: Consumer, tp: TopicPartition, timeout_s: float = 15.0
               ) -> tuple[int, int]:
    """The partition's (low, high) watermarks, retried through leader elections (a new
    topic, a broker restart: "leader high watermark is not caught up") until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=5)
            return int(low), int(high)
        except KafkaException:
            # NOT_LEADER / LEADER_NOT_AVAILABLE right after topic creation or a broker
            # restart are not flagged retriable by librdkafka here, yet pass in moments.
            # "Unknown partition" is the client's own stale metadata (the chaos soak saw it
            # last for a minute after a broker was killed): ask for the topic's again.
            if time.monotonic() > deadline:
                raise
            with contextlib.suppress(KafkaException):
                consumer.list_topics(tp.topic, timeout=2)
            time.sleep(0.2)


def committed_offsets(consumer: Consumer, tps: list[TopicPartition], timeout_s: float = 15.0
                      ) -> list[TopicPartition]:
    """The group's committed offsets of ``tps`` (``consumer`` reads them, never joins),
    retried until ``timeout_s`` while the group's coordinator moves or loads: a broker that
    just started or was restarted answers NOT_COORDINATOR or "load in progress" for a moment
    (a benchmark on a loaded machine failed on it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return list(consumer.committed(tps, timeout=min(10.0, max(timeout_s, 1.0))))
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def log_bounds(bootstrap: str, topic: str, partitions: list[int],
               timeout_s: float = 15.0) -> dict[int, tuple[int, int]]:
    """Each partition's (log start, read-committed end) offsets: two requests for all of
    them (a consumer's watermark query is one round trip per partition, and slow on an
    empty one), retried through leader elections until ``timeout_s``."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = []
            for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
                futures = admin.list_offsets(
                    {TopicPartition(topic, p): spec for p in partitions},
                    isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=5)
                found.append({tp.partition: int(f.result().offset)
                              for tp, f in futures.items()})
            return {p: (found[0][p], found[1][p]) for p in partitions}
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
