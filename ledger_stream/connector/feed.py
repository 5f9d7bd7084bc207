"""The dispatch topic as a connector reads it: in partition order, one record at a time,
with the answers to this instance's claims picked out as they stream past.

A connector that claims an attempt must keep reading its partitions to see the answer
(the answer is a later record on the same partition), without skipping the records in
between: they are queued and handled in order afterwards. Offsets are committed one record
at a time, only after that record was fully handled.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from ledger_stream.domain import events as ev
from ledger_stream.serde import AvroCodec, DecodeError

logger = logging.getLogger(__name__)

ANSWERS = (ev.Grant, ev.Held, ev.Reconcile, ev.Done)
Record = tuple[Message, Any]  # (message, decoded event or None when undecodable)


class DispatchFeed:
    def __init__(self, bootstrap: str, topic: str, group: str, codec: AvroCodec,
                 session_timeout_ms: int = 10_000) -> None:
        self._codec = codec
        self._queue: deque[Record] = deque()
        self._waiting: set[str] = set()
        self._answers: dict[str, Any] = {}
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"{group}-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": max(1_000, session_timeout_ms // 5),
        })
        self._consumer.subscribe([topic], on_revoke=self._on_revoke)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        kept = [(m, e) for m, e in self._queue if (m.topic(), m.partition()) not in gone]
        self._queue = deque(kept)

    def pump(self, timeout_s: float) -> None:
        """Read what has arrived (waiting up to ``timeout_s``) into the queue."""
        for msg in self._consumer.consume(200, timeout=timeout_s):
            if msg.error():
                logger.warning("dispatch read error", extra={"fields": {"err": str(msg.error())}})
                continue
            try:
                event = self._codec.decode(msg.value())
            except DecodeError as exc:
                logger.error("undecodable dispatch record skipped", extra={"fields": {
                    "partition": msg.partition(), "offset": msg.offset(), "reason": str(exc)}})
                event = None
            if isinstance(event, ANSWERS) and event.claim_id in self._waiting:
                self._answers[event.claim_id] = event
            self._queue.append((msg, event))

    def next(self, timeout_s: float) -> Record | None:
        if not self._queue:
            self.pump(timeout_s)
        return self._queue.popleft() if self._queue else None

    def expect(self, claim_id: str) -> None:
        """Watch for the answer to ``claim_id`` (call before producing the claim)."""
        self._waiting.add(claim_id)

    def answer(self, claim_id: str, timeout_s: float) -> Any | None:
        """The answer naming ``claim_id``, or None if none came within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while claim_id not in self._answers and time.monotonic() < deadline:
            self.pump(min(0.2, max(0.0, deadline - time.monotonic())))
        self._waiting.discard(claim_id)
        return self._answers.pop(claim_id, None)

    def idle_until(self, wall_time_s: float) -> None:
        """Wait until ``wall_time_s`` (epoch seconds) while keeping the group membership."""
        while (left := wall_time_s - time.time()) > 0:
            self.pump(min(0.2, left))

    def commit(self, msg: Message) -> None:
        """Mark ``msg`` handled. A partition lost meanwhile is simply not committed: its new
        owner re-reads the record and the protocol answers it again."""
        offset = TopicPartition(msg.topic(), msg.partition(), msg.offset() + 1)
        try:
            self._consumer.commit(offsets=[offset], asynchronous=False)
        except KafkaException as exc:
            logger.warning("dispatch offset not committed", extra={"fields": {
                "partition": msg.partition(), "offset": msg.offset(), "err": str(exc)}})

    def close(self) -> None:
        self._consumer.close()
