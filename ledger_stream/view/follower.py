"""The thread that keeps the view: reads every receipts partition and applies each key's
latest receipt, with the position reached, in one store write per poll.

The consumer is assigned every partition (it never joins a group: every view reads
everything, so any number of views can serve the same topic) and starts from the positions
the store holds. Positions are the consumer's, not the last record's offset + 1: transaction
markers take offsets that are never delivered, and a waiter asking for "everything up to the
end offset" must see the position pass them.

Freshness: :meth:`ReceiptView.wait_for` blocks until a partition's position reaches a given
offset. The SDK asks for the key partition's end offset at the moment ``status`` is called,
so a status reflects every receipt visible to read-committed readers when it was called (or
says it could not within its wait).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from prometheus_client import Counter, Gauge

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.message import error_text, fetched, position
from ledger_stream.kafka.offsets import end_offset
from ledger_stream.logs import log_fields
from ledger_stream.state.exceptions import StoreError
from ledger_stream.view.store import ViewStore

logger = logging.getLogger(__name__)

POLL_S = 0.05
DRAIN = 5000

APPLIED = Counter("ledger_view_receipts_applied", "receipts written to the view")
SKIPPED = Counter("ledger_view_records_skipped", "receipts records without key or value")
POSITION = Gauge("ledger_view_position", "next offset the view reads, per partition",
                 ["partition"])


class ViewStartError(Exception):
    """The view cannot start: its topic is missing."""


class ViewFailed(Exception):
    """The view cannot go on (its store failed); it answers nothing until restarted."""


class ReceiptView:
    def __init__(self, bootstrap: str, topic: str, store: ViewStore) -> None:
        self.topic = topic
        self._store = store
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap,
            **CLIENT_CONFIG,
            "group.id": f"ledger-view-{uuid.uuid4().hex}",  # never joined: partitions assigned
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 20,
        })
        try:
            self.partitions = self._partition_count()
            self._check_topic_id(bootstrap, store)
        except BaseException:
            self._consumer.close()
            raise
        self._positions = self._start_positions(store.positions())
        self._consumer.assign([TopicPartition(topic, p, offset or OFFSET_BEGINNING)
                               for p, offset in self._positions.items()])
        self._changed = threading.Condition()
        self._failure: str | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-view", daemon=True)

    def _partition_count(self, patience_s: float = 5.0) -> int:
        """The topic's partitions; a topic just created may take a moment to be known."""
        deadline = time.monotonic() + patience_s
        while True:
            meta = self._consumer.list_topics(self.topic, timeout=10).topics[self.topic]
            if meta.error is None and meta.partitions:
                return len(meta.partitions)
            if time.monotonic() > deadline:
                raise ViewStartError(f"{self.topic} is not available ({meta.error}): run "
                                     "`ledger-stream topics create` with the same settings")
            time.sleep(0.2)

    def _check_topic_id(self, bootstrap: str, store: ViewStore) -> None:
        """Rows of a deleted topic must not answer for the topic created in its place, nor a
        position in it be taken for one in the new topic: a store of another topic id is
        emptied first."""
        admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
        try:
            found = admin.describe_topics(TopicCollection([self.topic]), request_timeout=10)
            topic_id = str(found[self.topic].result(15).topic_id)
        except KafkaException as exc:
            raise ViewStartError(f"cannot describe {self.topic}: {exc.args[0].str()}") from exc
        stored = store.topic_id()
        if stored == topic_id:
            return
        if stored is not None:
            logger.warning("the receipts topic was created again; rebuilding the view",
                           extra=log_fields(topic=self.topic, old_id=stored, new_id=topic_id))
        store.reset(topic_id)

    def _start_positions(self, stored: dict[int, int]) -> dict[int, int]:
        positions = {}
        for partition in range(self.partitions):
            start = stored.get(partition, 0)
            end = end_offset(self._consumer, TopicPartition(self.topic, partition))
            if start > end:
                # The topic was recreated under the view: read it all again.
                logger.warning("view ahead of its topic; reading the partition again",
                               extra=log_fields(partition=partition, position=start, end=end))
                start = 0
            positions[partition] = start
            POSITION.labels(str(partition)).set(start)
        return positions

    def start(self) -> ReceiptView:
        self._thread.start()
        return self

    # -- reading ---------------------------------------------------------------------------

    def latest(self, key: bytes) -> bytes | None:
        """The key's latest receipt as applied so far (Avro bytes), or None."""
        self._check()
        return self._store.latest(key)

    def position(self, partition: int) -> int:
        with self._changed:
            return self._positions[partition]

    def positions(self) -> dict[int, int]:
        with self._changed:
            return dict(self._positions)

    def wait_for(self, partition: int, offset: int, timeout_s: float) -> bool:
        """Block until ``partition`` is applied up to ``offset`` (exclusive); False when
        ``timeout_s`` passed first."""
        with self._changed:
            reached = self._changed.wait_for(
                lambda: self._positions[partition] >= offset or self._failure is not None
                or self._closed.is_set(), timeout=max(0.0, timeout_s))
        self._check()
        return bool(reached) and self._positions[partition] >= offset

    def check(self) -> None:
        """Raise ViewFailed once the view has stopped applying receipts."""
        self._check()

    def _check(self) -> None:
        if self._failure is not None:
            raise ViewFailed(self._failure)

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        while not self._closed.is_set():
            try:
                rows = self._read()
                moved = {tp.partition: tp.offset for tp in self._consumer.position(tps)
                         if tp.offset >= 0 and tp.offset != self._positions[tp.partition]}
                if rows or moved:
                    self._store.apply(rows, moved)
                    self._advance(moved)
                    APPLIED.inc(len(rows))
            except KafkaException as exc:  # the client retries by itself; say so, go on
                logger.warning("receipts read error", extra=log_fields(error=str(exc)))
                # Records read but not applied must be read again: back to what is applied.
                try:
                    self._rewind()
                except KafkaException as again:
                    self._fail(f"cannot rewind after a read error: {again}")
                    return
                time.sleep(POLL_S)
            except StoreError as exc:
                self._fail(str(exc))
                return
            except Exception as exc:
                if self._closed.is_set():
                    return  # the consumer was closed under us: we are stopping
                self._fail(f"{type(exc).__name__}: {exc}")
                return

    def _rewind(self) -> None:
        with self._changed:
            positions = dict(self._positions)
        self._consumer.assign([TopicPartition(self.topic, p, offset or OFFSET_BEGINNING)
                               for p, offset in positions.items()])

    def _read(self) -> dict[bytes, bytes]:
        rows: dict[bytes, bytes] = {}
        for msg in fetched(self._consumer, DRAIN, POLL_S):
            if msg.error():
                logger.warning("consumer error", extra=log_fields(error=error_text(msg)))
                continue
            key, value = msg.key(), msg.value()
            if key is None or value is None:
                _, partition, offset = position(msg)
                SKIPPED.inc()
                logger.warning("receipts record without key or value skipped",
                               extra=log_fields(partition=partition, offset=offset))
                continue
            rows[key] = value  # records come in offset order: the last one wins
        return rows

    def _advance(self, moved: dict[int, int]) -> None:
        with self._changed:
            for partition, offset in moved.items():
                self._positions[partition] = offset
                POSITION.labels(str(partition)).set(offset)
            self._changed.notify_all()

    def _fail(self, reason: str) -> None:
        logger.error("view stopped", extra=log_fields(error=reason))
        with self._changed:
            self._failure = reason
            self._changed.notify_all()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=5 + POLL_S)
            if self._thread.is_alive():
                # Closing a client or store another thread is inside of is worse than
                # leaving both to the process's exit.
                logger.warning("view thread still busy; not closing its consumer and store")
                return
        self._consumer.close()
        self._store.close()
