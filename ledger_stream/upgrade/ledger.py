"""What the ledger holds, read for an upgrade check: a key's state (its newest changelog
row, the processor's own record), the intents a thread made (from the intents topic), and
how many intents the processor has not decided yet (a state read while it lags would miss
them). Read-only: nothing is produced, committed or joined."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from confluent_kafka import TopicPartition

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import KeyState
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.message import fetched
from ledger_stream.kafka.offsets import committed_offsets
from ledger_stream.kafka.reader import tail_topic
from ledger_stream.kafka.receipts import key_records
from ledger_stream.serde import AvroCodec, DecodeError
from ledger_stream.state.rows import decode_row


class Ledger(Protocol):
    def key_state(self, key: str) -> KeyState:
        """The key's state as the ledger holds it (``Phase.ABSENT`` when it holds none)."""
        ...

    def thread_intents(self, thread_ids: Collection[str]) -> dict[str, list[ev.Intent]]:
        """The intents whose workflow thread is one of ``thread_ids``, by thread."""
        ...

    def undecided(self, upto: Mapping[int, int] | None = None) -> int:
        """Intents recorded that the processor has not decided yet (its lag); with
        ``upto`` (``intent_ends()``), only those recorded before it."""
        ...

    def intent_ends(self) -> dict[int, int]:
        """The end offset of each intents partition now."""
        ...


class KafkaLedger:
    """The ledger's topics. A key's state is its newest changelog row: a row of a batch
    that crashed before its commit is decided again from the same inputs to the same row,
    so it is the state the ledger holds or is about to."""

    def __init__(self, settings: Settings, bootstrap: str, codec: AvroCodec,
                 progress: Callable[[str], None] = lambda _line: None) -> None:
        self._settings, self._bootstrap, self._codec = settings, bootstrap, codec
        self._progress = progress

    def key_state(self, key: str) -> KeyState:
        rows = key_records(self._bootstrap, self._settings.topic("changelog"), key)
        newest = rows[-1].value if rows else None
        return decode_row(newest) if newest else KeyState(key=key)

    def thread_intents(self, thread_ids: Collection[str]) -> dict[str, list[ev.Intent]]:
        wanted = set(thread_ids)
        found: dict[str, list[ev.Intent]] = defaultdict(list)
        read = 0
        for _partition, _offset, value in tail_topic(
                self._bootstrap, self._settings.topic("intents"), follow=False):
            read += 1
            if read % 50_000 == 0:
                self._progress(f"read {read} intents")
            if not value:
                continue
            try:
                intent = self._codec.decode(value, expect=(ev.Intent,))
            except DecodeError:
                continue  # poison: the processor sent it to the DLQ
            if intent.workflow.thread_id in wanted:
                found[intent.workflow.thread_id].append(intent)
        self._progress(f"read {read} intents")
        return dict(found)

    def undecided(self, upto: Mapping[int, int] | None = None) -> int:
        return undecided(self._settings, self._bootstrap, upto)

    def intent_ends(self) -> dict[int, int]:
        return intent_ends(self._settings, self._bootstrap)


def intent_ends(settings: Settings, bootstrap: str) -> dict[int, int]:
    """The end offset of each partition of the intents topic now: what ``undecided`` counts
    up to, so a wait for the intents recorded before it ends while others keep coming."""
    topic, consumer, partitions = _intents_reader(settings, bootstrap)
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}
    finally:
        consumer.close()


def _intents_reader(settings: Settings, bootstrap: str) -> tuple[str, Consumer, list[int]]:
    """The intents topic, a reader in the processors' group (never joined: it reads their
    committed offsets) and the topic's partitions; the caller closes the reader."""
    topic = settings.topic("intents")
    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "group.id": settings.processor.consumer_group,
                         "enable.auto.commit": False})
    try:
        return topic, consumer, list(consumer.list_topics(topic, timeout=10).topics[topic]
                                     .partitions)
    except BaseException:
        consumer.close()
        raise


def undecided(settings: Settings, bootstrap: str, upto: Mapping[int, int] | None = None
              ) -> int:
    """Intents recorded that the processors' group (``settings.processor.consumer_group``)
    has not committed yet: its lag on the intents topic; with ``upto`` (each partition's
    end offset, ``intent_ends``), only those recorded before it (none in a partition
    added since). A short lag is counted in records a read-committed reader gets: an
    exactly-once processor forwards intents in transactions, and a transaction's marker
    (or an aborted record) takes an offset no processor ever commits past."""
    topic, consumer, partitions = _intents_reader(settings, bootstrap)
    try:
        parts = [TopicPartition(topic, p) for p in partitions]
        committed = committed_offsets(consumer, parts, 10)
        behind = 0
        for tp in committed:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition),
                                                       timeout=10)
            if upto is not None:
                high = min(high, upto.get(tp.partition, 0))
            start = max(tp.offset, low)
            gap = high - start
            if 0 < gap <= COUNTED_LAG:
                gap = _records_between(consumer, topic, tp.partition, start, high)
            behind += max(0, gap)
        return behind
    finally:
        consumer.close()


# Up to this many offsets of lag are counted record by record (a read); more is counted as
# offsets, a lag too long to be only markers and aborted records.
COUNTED_LAG = 1_000


def _records_between(consumer: Consumer, topic: str, partition: int, start: int,
                     end: int) -> int:
    """The records a read-committed reader gets from ``start`` up to ``end`` (transaction
    markers and aborted records left out); ``end - start`` when the read does not finish
    within 10 s (an open transaction holds it: those records still count)."""
    consumer.assign([TopicPartition(topic, partition, start)])
    found, deadline = 0, time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            for msg in fetched(consumer, 500, 0.5):
                if not msg.error() and (msg.offset() or 0) < end:
                    found += 1
            [at] = consumer.position([TopicPartition(topic, partition)])
            if at.offset >= end:
                return found
    finally:
        consumer.unassign()
    return end - start
