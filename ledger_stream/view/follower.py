"""The threads that keep the view: each reads every partition of its topics and applies what
it read, with the positions reached, in one store write per poll. ``ReceiptView`` keeps each
key's latest receipt; ``history.HistoryView`` keeps every record of every ledger topic by key
(the timeline).

The consumer is assigned every partition (it never joins a group: every view reads
everything, so any number of views can serve the same topics) and starts from the positions
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
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from prometheus_client import Counter, Gauge

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.message import error_text, fetched, position
from ledger_stream.kafka.offsets import log_bounds
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
    """The view cannot start: a topic is missing."""


class ReadAgain(Exception):
    """What was read cannot be applied now but will be later (the schema registry is
    away): read it again from the applied positions after a pause."""


class ViewFailed(Exception):
    """The view cannot go on (its store failed); it answers nothing until restarted."""


TP = tuple[str, int]  # (topic, partition)


class Follower:
    """Reads every partition of ``topics`` into the store, from the positions it holds.

    A subclass says where positions and topic ids are kept (``_stored_positions``,
    ``_stored_ids``, ``_reset``) and what a poll writes (``_apply``)."""

    name = "view"

    def __init__(self, bootstrap: str, topics: tuple[str, ...], store: ViewStore) -> None:
        self.topics = topics
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
            self.counts = {topic: self._partition_count(topic) for topic in topics}
            self._check_topic_ids(bootstrap)
            self._positions = self._start_positions(bootstrap, self._stored_positions())
        except BaseException:
            self._consumer.close()
            raise
        self._consumer.assign([TopicPartition(t, p, offset or OFFSET_BEGINNING)
                               for (t, p), offset in self._positions.items()])
        self._changed = threading.Condition()
        self._failure: str | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"ledger-{self.name}",
                                        daemon=True)

    # -- what a subclass decides ---------------------------------------------------------------

    def _stored_positions(self) -> dict[TP, int]:
        raise NotImplementedError

    def _stored_ids(self) -> list[str] | None:
        raise NotImplementedError

    def _reset(self, ids: list[str]) -> None:
        raise NotImplementedError

    def _apply(self, messages: list[Message], moved: dict[TP, int]) -> int:
        """Write what ``messages`` bring and the positions ``moved`` in one store write;
        the number of records written."""
        raise NotImplementedError

    def _on_position(self, topic: str, partition: int, offset: int) -> None:
        """A partition's position moved (for a gauge)."""

    # -- starting --------------------------------------------------------------------------------

    def _partition_count(self, topic: str, patience_s: float = 5.0) -> int:
        """The topic's partitions; a topic just created may take a moment to be known."""
        deadline = time.monotonic() + patience_s
        while True:
            meta = self._consumer.list_topics(topic, timeout=10).topics[topic]
            if meta.error is None and meta.partitions:
                return len(meta.partitions)
            if time.monotonic() > deadline:
                raise ViewStartError(f"{topic} is not available ({meta.error}): run "
                                     "`ledger-stream topics create` with the same settings")
            time.sleep(0.2)

    def _check_topic_ids(self, bootstrap: str) -> None:
        """Rows of a deleted topic must not answer for the topic created in its place, nor a
        position in it be taken for one in the new topic: a store of other topic ids is
        emptied first."""
        admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
        try:
            found = admin.describe_topics(TopicCollection(list(self.topics)),
                                          request_timeout=10)
            ids = [str(found[topic].result(15).topic_id) for topic in self.topics]
        except KafkaException as exc:
            raise ViewStartError(f"cannot describe {', '.join(self.topics)}: "
                                 f"{exc.args[0].str()}") from exc
        stored = self._stored_ids()
        if stored == ids:
            return
        if stored is not None:
            logger.warning("a followed topic was created again (or the store's format "
                           "changed); rebuilding from the start",
                           extra=log_fields(view=self.name, topics=",".join(self.topics),
                                            old_ids=",".join(stored), new_ids=",".join(ids)))
        self._reset(ids)

    def _start_positions(self, bootstrap: str, stored: dict[TP, int]) -> dict[TP, int]:
        positions = {}
        for topic, count in self.counts.items():
            bounds = log_bounds(bootstrap, topic, list(range(count)))
            for partition in range(count):
                start = stored.get((topic, partition), 0)
                end = bounds[partition][1]
                if start > end:
                    # The topic was recreated under the view: read it all again.
                    logger.warning("view ahead of its topic; reading the partition again",
                                   extra=log_fields(topic=topic, partition=partition,
                                                    position=start, end=end))
                    start = 0
                positions[(topic, partition)] = start
                self._on_position(topic, partition, start)
        return positions

    def start(self) -> Follower:
        self._thread.start()
        return self

    # -- reading ---------------------------------------------------------------------------------

    def position_of(self, topic: str, partition: int) -> int:
        with self._changed:
            return self._positions[(topic, partition)]

    def all_positions(self) -> dict[TP, int]:
        with self._changed:
            return dict(self._positions)

    def wait_until(self, wanted: dict[TP, int], timeout_s: float) -> bool:
        """Block until every partition of ``wanted`` is applied up to its offset
        (exclusive); False when ``timeout_s`` passed first."""
        def reached() -> bool:
            return all(self._positions[tp] >= offset for tp, offset in wanted.items())

        with self._changed:
            self._changed.wait_for(
                lambda: reached() or self._failure is not None or self._closed.is_set(),
                timeout=max(0.0, timeout_s))
            done = reached()
        self._check()
        return done

    @property
    def busy(self) -> bool:
        """The thread is still running (after ``close``: it did not stop in time)."""
        return self._thread.is_alive()

    def check(self) -> None:
        """Raise ViewFailed once the view has stopped applying what it reads."""
        self._check()

    def _check(self) -> None:
        if self._failure is not None:
            raise ViewFailed(self._failure)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        tps = [TopicPartition(t, p) for t, p in self._positions]
        while not self._closed.is_set():
            try:
                messages = fetched(self._consumer, DRAIN, POLL_S)
                moved = {(tp.topic, tp.partition): tp.offset
                         for tp in self._consumer.position(tps)
                         if tp.offset >= 0 and tp.offset != self._positions[(tp.topic,
                                                                              tp.partition)]}
                if messages or moved:
                    self._apply([m for m in messages if not self._failed_message(m)], moved)
                    self._advance(moved)
            except (KafkaException, ReadAgain) as exc:  # passing trouble: say so, go on
                logger.warning("read error", extra=log_fields(view=self.name, error=str(exc)))
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

    def _failed_message(self, msg: Message) -> bool:
        if msg.error():
            logger.warning("consumer error", extra=log_fields(view=self.name,
                                                              error=error_text(msg)))
            return True
        return False

    def _rewind(self) -> None:
        with self._changed:
            positions = dict(self._positions)
        self._consumer.assign([TopicPartition(t, p, offset or OFFSET_BEGINNING)
                               for (t, p), offset in positions.items()])

    def _advance(self, moved: dict[TP, int]) -> None:
        with self._changed:
            for (topic, partition), offset in moved.items():
                self._positions[(topic, partition)] = offset
                self._on_position(topic, partition, offset)
            self._changed.notify_all()

    def _fail(self, reason: str) -> None:
        logger.error("view stopped", extra=log_fields(view=self.name, error=reason))
        with self._changed:
            self._failure = reason
            self._changed.notify_all()

    def close(self) -> None:
        """Stop the thread, then close the consumer (the store is the caller's)."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=5 + POLL_S)
            if self._thread.is_alive():
                # Closing a client another thread is inside of is worse than leaving it to
                # the process's exit.
                logger.warning("view thread still busy; not closing its consumer",
                               extra=log_fields(view=self.name))
                return
        self._consumer.close()


class ReceiptView(Follower):
    """Each key's latest receipt, from the receipts topic."""

    name = "view"

    def __init__(self, bootstrap: str, topic: str, store: ViewStore,
                 close_store: bool = True) -> None:
        self.topic = topic
        self._close_store = close_store
        super().__init__(bootstrap, (topic,), store)
        self.partitions = self.counts[topic]

    def _stored_positions(self) -> dict[TP, int]:
        return {(self.topic, p): offset for p, offset in self._store.positions().items()}

    def _stored_ids(self) -> list[str] | None:
        stored = self._store.topic_id()
        return [stored] if stored is not None else None

    def _reset(self, ids: list[str]) -> None:
        self._store.reset(ids[0])

    def _on_position(self, topic: str, partition: int, offset: int) -> None:
        POSITION.labels(str(partition)).set(offset)

    def _apply(self, messages: list[Message], moved: dict[TP, int]) -> int:
        rows: dict[bytes, bytes] = {}
        for msg in messages:
            key, value = msg.key(), msg.value()
            if key is None or value is None:
                _, partition, offset = position(msg)
                SKIPPED.inc()
                logger.warning("receipts record without key or value skipped",
                               extra=log_fields(partition=partition, offset=offset))
                continue
            rows[key] = value  # records come in offset order: the last one wins
        self._store.apply(rows, {p: offset for (_, p), offset in moved.items()})
        APPLIED.inc(len(rows))
        return len(rows)

    def latest(self, key: bytes) -> bytes | None:
        """The key's latest receipt as applied so far (Avro bytes), or None."""
        self._check()
        return self._store.latest(key)

    def position(self, partition: int) -> int:
        return self.position_of(self.topic, partition)

    def positions(self) -> dict[int, int]:
        return {p: offset for (_, p), offset in self.all_positions().items()}

    def wait_for(self, partition: int, offset: int, timeout_s: float) -> bool:
        """Block until ``partition`` is applied up to ``offset`` (exclusive); False when
        ``timeout_s`` passed first."""
        return self.wait_until({(self.topic, partition): offset}, timeout_s)

    def close(self) -> None:
        super().close()
        if self._close_store and not self.busy:
            self._store.close()
