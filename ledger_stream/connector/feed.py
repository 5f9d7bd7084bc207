"""The dispatch topic as a connector reads it: decoded records, the partitions this instance
owns, and which records were already there when a partition was assigned (the backlog).

Cooperative rebalancing: an assignment adds partitions, a revocation takes some away, and
the callbacks tell the connector core before the consumer moves on. Offsets are committed
only when the core says a record is completely handled.

A fence (a pre-granted dispatch, ``pregrant.py``) is an asynchronous commit like the others:
its answer comes from the consumer's ``on_commit``, served inside ``poll`` on the loop's
thread, and is matched by partition and offset (one fence at a time per partition: only its
commit frontier is fenced, and no other commit of that partition reaches past it).
librdkafka answers every commit, at the latest when it gives up waiting for the
coordinator (``session.timeout.ms``) or for the request (``socket.timeout.ms``). It does
not finish giving a revoked partition up, nor rejoin the group, while a commit of its is
outstanding (``rd_kafka_assignment_serve`` waits for ``wait_commit_cnt`` to reach 0): a
fence that lands does so before the partition's next owner reads its starting offset.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from ledger_stream import tracing
from ledger_stream.connector.commands import Record
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.message import position
from ledger_stream.logs import log_fields
from ledger_stream.serde import AvroCodec, DecodeError, SchemaRegistryUnavailable

logger = logging.getLogger(__name__)

Callback = Callable[[list[int]], None]
Fenced = Callable[[int, int, bool], None]  # partition, offset, accepted
ConsumerFactory = Callable[[dict[str, object]], confluent_kafka.Consumer]


class DispatchFeed:
    def __init__(self, bootstrap: str, topic: str, group: str, codec: AvroCodec,
                 session_timeout_ms: int, on_assign: Callback, on_revoke: Callback,
                 consumer: confluent_kafka.Consumer | ConsumerFactory | None = None,
                 on_fenced: Fenced | None = None) -> None:
        """``consumer``: a client of its own, or what builds one from this feed's settings
        (whose ``on_commit`` answers fences); ``on_fenced``: told each fence's answer."""
        self._topic = topic
        self._codec = codec
        self._assigned_cb, self._revoked_cb = on_assign, on_revoke
        self._fenced_cb = on_fenced or (lambda _p, _o, _ok: None)
        self._backlog: dict[int, int] = {}  # partition -> high watermark at assignment
        self._fencing: dict[int, int] = {}  # partition -> the offset its fence commits
        self._held: dict[int, int] = {}  # partition -> a lower commit the fence covers
        config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            **CLIENT_CONFIG,
            "group.id": group,
            "client.id": f"{group}-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": max(1_000, session_timeout_ms // 5),
            "fetch.wait.max.ms": 50,
            "on_commit": self._on_commit,
        }
        if consumer is None:
            self._consumer: confluent_kafka.Consumer = Consumer(config)
        else:
            self._consumer = consumer(config) if callable(consumer) else consumer
        self._consumer.subscribe([topic], on_assign=self._on_assign,
                                 on_revoke=self._on_revoke, on_lost=self._on_revoke)

    def _on_assign(self, consumer: confluent_kafka.Consumer,
                    partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            try:
                _, high = consumer.get_watermark_offsets(tp, timeout=5)
            except KafkaException:
                high = 1 << 62  # unknown: treat everything as backlog (no fast path)
            self._backlog[tp.partition] = high
        self._assigned_cb([tp.partition for tp in partitions])

    def _on_revoke(self, consumer: confluent_kafka.Consumer,
                    partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._backlog.pop(tp.partition, None)
        self._revoked_cb([tp.partition for tp in partitions])

    def poll(self, timeout_s: float) -> list[Record]:
        """What has arrived: waits up to ``timeout_s`` for the first record, then takes what
        is already fetched (never waits for a batch to fill)."""
        first = self._consumer.poll(timeout_s)
        if first is None:
            return []
        records, paused = [], set()
        for msg in (first, *self._consumer.consume(500, timeout=0)):
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    logger.warning("dispatch read error", extra=log_fields(err=err.str()))
                continue
            _, partition, offset = position(msg)
            if partition in paused:
                continue
            try:
                records.append(self._record(msg))
            except SchemaRegistryUnavailable as exc:
                # A registry outage is not bad data: read the record again later.
                paused.add(partition)
                self.rewind(partition, offset)
                logger.warning("schema registry unavailable; reading again", extra=log_fields(
                    partition=partition, offset=offset, err=str(exc)))
        return records

    def _record(self, msg: Message) -> Record:
        _, partition, offset = position(msg)
        try:
            event: object = self._codec.decode(msg.value())
        except DecodeError as exc:
            logger.error("undecodable dispatch record skipped", extra=log_fields(
                partition=partition, offset=offset, reason=str(exc)))
            event = None
        _, timestamp = msg.timestamp()
        backlog = offset < self._backlog.get(partition, 1 << 62)
        return Record(partition, offset, event, timestamp, backlog,
                      tracing.of_message(msg))

    def rewind(self, partition: int, offset: int) -> None:
        self._consumer.seek(TopicPartition(self._topic, partition, offset))

    def commit(self, offsets: dict[int, int], wait: bool = False) -> None:
        """Commit ``partition -> next offset``. A partition lost meanwhile is simply not
        committed: its new owner reads the record again and the protocol answers it. An
        offset a partition's outstanding fence covers waits for that fence's answer (sent
        after it, it would move the partition's offset back)."""
        for p, o in list(offsets.items()):
            if o <= self._fencing.get(p, -1):
                self._held[p] = max(o, self._held.get(p, o))
                offsets = {q: x for q, x in offsets.items() if q != p}
        tps = [TopicPartition(self._topic, p, o) for p, o in offsets.items()]
        if not tps:
            return
        try:
            if wait:
                self._consumer.commit(offsets=tps, asynchronous=False)
            else:
                self._consumer.commit(offsets=tps, asynchronous=True)
        except KafkaException as exc:
            logger.warning("dispatch offsets not committed", extra=log_fields(
                offsets=offsets, err=str(exc)))

    def fence(self, partition: int, offset: int) -> bool:
        """Ask to commit ``partition -> offset``, asynchronously, only while the partition
        is assigned to this member and no fence of it is outstanding: False at once when
        either fails (or the client refused to ask); else ``on_fenced`` is told, from
        inside a later ``poll``, whether the group coordinator accepted it (it accepts a
        commit only from a member of its current generation)."""
        if partition not in self._backlog or partition in self._fencing:
            return False  # not assigned (revoked, lost, never had it), or a fence is out
        tp = TopicPartition(self._topic, partition, offset)
        self._fencing[partition] = offset
        try:
            self._consumer.commit(offsets=[tp], asynchronous=True)
        except KafkaException as exc:
            self._answered(partition, offset, str(exc))
            return False
        return True

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's answer to an asynchronous commit (inside ``poll``)."""
        for tp in partitions:
            error = err or tp.error
            if tp.topic == self._topic and self._fencing.get(tp.partition) == tp.offset:
                self._answered(tp.partition, tp.offset, "" if error is None else error.str())
                self._fenced_cb(tp.partition, tp.offset, error is None)
            elif error is not None:
                logger.warning("dispatch offsets not committed", extra=log_fields(
                    partition=tp.partition, offset=tp.offset, err=error.str()))

    def _answered(self, partition: int, offset: int, error: str) -> None:
        """A fence's answer: a commit it held goes out if it failed (and the partition is
        still this member's), else the fence covered it."""
        del self._fencing[partition]
        held = self._held.pop(partition, None)
        if error:
            logger.warning("pre-granted dispatch not fenced", extra=log_fields(
                partition=partition, offset=offset, err=error))
            if held is not None and partition in self._backlog:
                self.commit({partition: held})

    def close(self) -> None:
        self._consumer.close()
