"""Step a of the checkpoint: the records of one poll, decided in time order
(``in_time_order``) against in-memory overlays of their partitions' stores. Nothing leaves
the process until step b; dropping a Batch abandons it without a trace."""

from __future__ import annotations

import heapq
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Message, TopicPartition

from ledger_stream import tracing
from ledger_stream.domain import events as ev
from ledger_stream.kafka.message import position
from ledger_stream.processor.changelog import Positions
from ledger_stream.processor.exceptions import OutputTooLarge
from ledger_stream.processor.limits import RECORD_MAX, RECORD_ROOM
from ledger_stream.processor.partition import PartitionOverlay
from ledger_stream.processor.step import Forward, LedgerStep, Out
from ledger_stream.state import PartitionStore


def in_time_order(records: list[Message]) -> list[Message]:
    """The records of one poll merged across partitions by broker timestamp, each
    partition's kept in its own (offset) order. The client returns what it fetched
    partition by partition, so attempts-p may come before the intents-p records that caused
    them. At least once, a new owner reads both from the committed offsets, where the claims
    its predecessor's dispatches drew lie too: in time order it decides the intent first
    when both came in one poll, instead of answering the claim ``Done`` and raising a false
    ``effect_without_intent`` (exactly once, such claims are never visible first).

    The order is ``heapq.merge``'s over the runs (one per topic-partition, in the order
    they first appear; ties go to the earlier run). When every run's timestamps rise, as
    they do unless a producer set a clock that went back, that is a stable sort of the
    runs laid end to end, done in C here (``merge`` is Python, a few µs a record)."""
    runs: dict[tuple[str | None, int | None], list[Message]] = {}
    for msg in records:
        run = runs.get((msg.topic(), msg.partition()))
        if run is None:
            runs[(msg.topic(), msg.partition())] = [msg]
        else:
            run.append(msg)
    if len(runs) < 2:
        return records
    laid: list[Message] = []
    stamps: list[int] = []
    for run in runs.values():
        times = [_timestamp(msg) for msg in run]
        if times != sorted(times):  # a clock that went back: merge's own order
            return list(heapq.merge(*runs.values(), key=_timestamp))
        laid += run
        stamps += times
    return [laid[i] for i in sorted(range(len(laid)), key=stamps.__getitem__)]


def _timestamp(msg: Message) -> int:
    return int(msg.timestamp()[1])


class Batch:
    def __init__(self, step: LedgerStep, stores: dict[int, PartitionStore],
                 committed: dict[int, Positions], topics: tuple[str, str],
                 member: str | None = None, group_metadata: Any = None,
                 sent_ms: int = 0) -> None:
        """``topics`` is (intents topic, attempts topic); ``member`` and ``group_metadata``
        are the consumer's when the records were polled (the generation that owns them).
        ``sent_ms``: the wall clock when the batch's outputs leave (read as the batch starts,
        a checkpoint's produce and commit later; 0: not known). A key that waits for an
        answer to one of them counts its deadline from no earlier than this, so a processor
        catching up a backlog never expires it before the answer could be in the log."""
        self._step = step
        self._stores = stores
        self._committed = committed
        self._intents, self._attempts = topics
        self.member = member
        self.group_metadata = group_metadata
        self.overlays: dict[int, PartitionOverlay] = {}
        self.outputs: list[Out] = []
        self.ticks: list[int] = []  # partitions to append a Tick to
        self.records = 0
        self.sent_ms = sent_ms
        self._next: dict[tuple[str, int], int] = {}

    def overlay(self, partition: int) -> PartitionOverlay:
        overlay = self.overlays.get(partition)
        if overlay is None:
            overlay = PartitionOverlay(self._stores[partition], self._step.policy)
            self.overlays[partition] = overlay
        return overlay

    def add_all(self, records: list[Message]) -> None:
        """Add ``records`` in their order, their partitions' stored states read first, one
        multi-get per partition."""
        keys: dict[int, list[str]] = {}
        for msg in records:
            key = msg.key()
            if key and not key.startswith(b"~"):  # Ticks and freezes name no key's row
                try:  # not contextlib.suppress: a context manager per record costs 0.5 µs
                    text = key.decode("utf-8")
                except UnicodeDecodeError:  # poison: read says why
                    continue
                wanted = keys.get(msg.partition() or 0)
                if wanted is None:
                    keys[msg.partition() or 0] = [text]
                else:
                    wanted.append(text)
        for partition, wanted in keys.items():
            if partition in self._stores:
                self.overlay(partition).read_ahead(wanted)
        try:
            for msg in records:
                self.add(msg)
        finally:  # what was decided counts, as it would have one record at a time
            self._step.tally.flush()

    def add(self, msg: Message) -> None:
        """Advance the partition clock to the record's broker timestamp, fire the timers
        that came, then decide the record (a Tick only moves the clock; a Containment changes the
        partition's freezes). The record's own timestamp goes to the decision too: the clock
        may be ahead of it (read on the other topic), and a fenced claim is judged against the
        pre-grant's end by its own time (``decide``)."""
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        if topic is None or partition is None or offset is None:
            topic, partition, offset = position(msg)  # raises: an error, not a record
        overlay = self.overlays.get(partition) or self.overlay(partition)
        now = stamp = msg.timestamp()[1]
        if now > overlay.clock:  # overlay.advance, inline: once per record
            overlay.clock = now
        else:
            now = overlay.clock
        step = self._step
        for due, key in overlay.due_now():
            self.outputs.extend(step.timer(overlay, key, due, now, self.sent_ms))
        record_key, value = msg.key(), msg.value()
        event = step.read(value, record_key, topic, partition, offset, now)
        if isinstance(event, Forward):  # placed under the count before repartition
            self.outputs += _forwarded(step, overlay, msg, event,
                                       (topic, partition, offset, record_key, value or b""), now)
        elif isinstance(event, ev.Containment):
            self.outputs.extend(step.contain(overlay, event, now, (topic, offset),
                                             record_key or b"", self.sent_ms))
        elif not isinstance(event, ev.Tick):
            # The input's trace context goes on what answers it (never a new span's: the
            # same input must produce the same records on a replay).
            try:
                self.outputs += step.decide(overlay, event, now, self.sent_ms,
                                            tracing.of_message(msg), stamp)
            except OutputTooLarge as exc:  # dead-lettered, not a batch that fails each retry
                self.outputs += step.dead_letter(
                    overlay, (topic, partition, offset, record_key, value or b""),
                    f"Kafka would refuse its outputs: {exc}", now)
        self._next[(topic, partition)] = offset + 1
        self.records += 1

    def positions(self, partition: int) -> Positions:
        """The next input offsets of ``partition`` once this batch is committed."""
        before = self._committed.get(partition, Positions())
        return Positions(self._next.get((self._intents, partition), before.intents),
                         self._next.get((self._attempts, partition), before.attempts))

    def offsets(self, metadata: str = "") -> list[TopicPartition]:
        """The input offsets this batch commits (both topics of every partition it read),
        each carrying ``metadata`` (the policy revision that decided the batch)."""
        found = []
        for partition in self.overlays:
            positions = self.positions(partition)
            for topic, offset in ((self._intents, positions.intents),
                                  (self._attempts, positions.attempts)):
                if offset >= 0:
                    found.append(TopicPartition(topic, partition, offset, metadata)
                                 if metadata else TopicPartition(topic, partition, offset))
        return found


def _forwarded(step: LedgerStep, overlay: PartitionOverlay, msg: Message, to: Forward,
               record: tuple[str, int, int, bytes | None, bytes], now: int) -> list[Out]:
    """The record, unchanged, to its key's partition now; dead-lettered instead when the
    processor's producer would refuse it (another producer, with a larger limit, wrote it:
    a refused produce would fail every retry of the batch)."""
    try:
        raw = msg.headers() or []
    except Exception:  # noqa: BLE001 - a header name not UTF-8 makes the client raise
        raw = []  # the record still goes home (a raise here would recur on restart)
    pairs = raw.items() if isinstance(raw, dict) else raw
    headers = tuple((str(n), d) for n, d in pairs if isinstance(d, bytes))
    key, value = record[3] or b"", record[4]
    size = len(key) + len(value) + sum(len(n.encode()) + len(d) for n, d in headers)
    if size > RECORD_ROOM:
        return step.dead_letter(overlay, record, (
            f"a record to forward to partition {to.partition} takes {size:,} bytes with its "
            f"key and headers, more than Kafka takes in a record ({RECORD_MAX:,})"), now)
    return [Out(to.role, record[3], value, headers, to.partition)]


def rewind_to(positions: Positions, topics: tuple[str, str], partition: int
              ) -> list[TopicPartition]:
    """Where to read ``partition`` from again: its committed offsets (the start when none)."""
    return [TopicPartition(topic, partition, offset if offset >= 0 else OFFSET_BEGINNING)
            for topic, offset in zip(topics, (positions.intents, positions.attempts),
                                     strict=True)]
