"""Catching a partition's store up from the changelog, before any input of the partition is
decided (on assignment).

The store records the changelog offset it reflects; restore reads the changelog partition
from there to its end (read_committed, so records of aborted transactions never count) and
applies each record whose batch was committed: its group is ours and its input positions
are at or below the group's committed offsets. A record of ours beyond those offsets is
skipped, and the store's changelog offset stays at the first one skipped, because its batch
either crashed before its commit (its inputs are decided again, and their new records come
later in the changelog) or committed after this member read the offsets (a newer owner's
batch: this member's assignment is already stale). A later restore, with newer committed
offsets, reads from there again and applies what is committed by then, in changelog order,
as a restore from scratch would; advancing past a skipped record would lose a committed
one for good. Records of other groups or without our headers are never ours: skipped and
passed. An empty or deleted state folder starts at offset 0 and is rebuilt entirely.

The timer index is derived from the restored rows (``due_ms`` under this processor's
policy), and the clock from the ``~clock`` records, so a restored store decides exactly as
the one that was lost. A row's deadline comes from the basis written beside it
(``changelog.DUE``), so rows are not decoded; a row written without one, or with an older
version's (``ledger.due.v1``, whose basis ignored the pre-grant: changelog.py), or with one
this code does not read, is. Dropping the timer entry of the row a key had
before decodes that row (a key appears once in a compacted changelog: rare).

The records of one batch carry the same group and positions headers, so a consumed record
whose headers are exactly those the processor writes takes its batch's verdict (applied,
not ours, not committed) without being parsed again; any other is parsed in full
(``_Applier.add_consumed``; tests/processor/test_restore_fast_path.py holds the two paths
equal).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from ledger_stream.domain.deadlines import SEAL, allowances, due_ms
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.message import fetched
from ledger_stream.kafka.offsets import end_offset
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.logs import log_fields
from ledger_stream.processor import changelog
from ledger_stream.processor.exceptions import ProcessorError
from ledger_stream.state import PartitionStore, StoreBatch, TimerEntry
from ledger_stream.state.rows import RowDeadline, decode_values

logger = logging.getLogger(__name__)

_APPLY, _FOREIGN, _UNCOMMITTED = 0, 1, 2  # what restore does with a record

CHUNK = 5_000  # keys per store write while restoring (one partition's rows in memory)
WAIT_NOTICE_S = 3.0  # nothing to read for this long, short of the end: say why


@dataclass
class RestoreStats:
    applied: int = 0
    skipped: int = 0
    seconds: float = 0.0
    waited: float = 0.0  # of ``seconds``, spent waiting for the broker: end offsets, fetches


class _Applier:
    """Applies one partition's changelog records to its store, in chunks."""

    def __init__(self, store: PartitionStore, committed: changelog.Positions, group: str,
                 policy: Policy, start: int, home_count: int | None = None) -> None:
        self.store = store
        self._home_count = home_count
        self.stats = RestoreStats()
        self._committed = committed
        self._group = group
        self._policy = policy
        self._rows: dict[str, bytes] = {}
        self._dues: dict[str, bytes | None] = {}  # each row's ledger.due header
        self._allowance = allowances(policy)
        self._clock: int | None = None
        self._last = start - 1
        self._held_at: int | None = None  # the first record of ours not committed yet
        self._batch: tuple[object, object, object] | None = None  # the last batch's headers
        self._batch_verdict = _FOREIGN

    def add(self, record: changelog.ChangelogRecord) -> None:
        self._apply(record.offset, record.key, record.value, record.due, self._verdict(record))

    def add_consumed(self, offset: int, key: bytes | None, value: bytes | None,
                     headers: Any) -> None:
        """``add(changelog.parse(offset, key, value, headers))`` for a consumed record, at
        less cost: every record of one batch carries the same group and positions, so
        their verdict is taken once per batch. Only headers exactly as the processor writes
        them (group, intents, attempts, then the due basis of a row) take this path; any
        other record is parsed in full."""
        h = headers
        if (value is None or type(h) is not list or not 3 <= len(h) <= 4
                or h[0][0] != changelog.GROUP or h[1][0] != changelog.INTENTS
                or h[2][0] != changelog.ATTEMPTS
                or (len(h) == 4 and h[3][0] != changelog.DUE)):
            self.add(changelog.parse(offset, key, value, h))
            return
        batch = (h[0][1], h[1][1], h[2][1])
        if batch != self._batch:  # parsed exactly as ``changelog.parse`` does, once
            self._batch = batch
            self._batch_verdict = self._verdict(changelog.parse(offset, key, value, h[:3]))
        due = h[3][1] if len(h) == 4 else None
        self._apply(offset, key or b"", value,
                    due.encode() if isinstance(due, str) else due, self._batch_verdict)

    def _verdict(self, record: changelog.ChangelogRecord) -> int:
        if record.group != self._group or record.value is None:
            return _FOREIGN
        if not record.positions.covered_by(self._committed):
            return _UNCOMMITTED
        return _APPLY

    def _apply(self, offset: int, key: bytes, value: bytes | None, due: bytes | None,
               verdict: int) -> None:
        self._last = offset
        if verdict != _APPLY:
            self.stats.skipped += 1
            if verdict == _UNCOMMITTED and self._held_at is None:
                self._held_at = offset
            return
        assert value is not None  # a record without a value is foreign
        if (self._home_count is not None and key[:1] != b"~"
                and partition_for(key, self._home_count) != self.store.partition):
            self.stats.skipped += 1  # a row left behind by repartition: its key moved
            return
        self.stats.applied += 1
        if key == changelog.CLOCK_KEY:
            self._clock = max(self._clock or 0, int(value))
        else:
            text = key.decode("utf-8")
            self._rows[text] = value
            self._dues[text] = due
        if len(self._rows) >= CHUNK:
            self._write(self._last + 1)

    def finish(self, end_offset: int | None) -> RestoreStats:
        final = max(self._last + 1, end_offset or 0)
        if self._held_at is not None:
            final = min(final, self._held_at)
        if self._rows or self._clock is not None or final != self.store.changelog_offset:
            self._write(final)
        return self.stats

    def _write(self, offset: int) -> None:
        removed: set[TimerEntry] = set()
        added: set[TimerEntry] = set()
        for key, row in self._rows.items():
            if key == changelog.CONTAINMENT_KEY:
                continue  # the partition's containment row, not a key: no timer
            old = self.store.get(key)
            if old is not None and (before := self._decoded_due(old)) is not None:
                removed.add((before, key))
            if (after := self._due(row, self._dues[key])) is not None:
                added.add((after, key))
        if self._held_at is not None:
            offset = min(offset, self._held_at)
        self.store.write(StoreBatch(self._rows, removed, added, self._clock, offset))
        self._rows, self._dues, self._clock = {}, {}, None

    def _due(self, row: bytes, header: bytes | None) -> int | None:
        """The row's deadline from its basis header, or from the row itself."""
        if header is not None:
            try:
                basis = changelog.parse_due(header)
            except ValueError:
                pass  # not a basis this code writes: the row itself says
            else:
                if basis is None:
                    return None
                if not (basis[0] == SEAL and self._policy.windows_per_action):
                    return basis[1] + self._allowance[basis[0]]
                # An action may seal sooner than the ledger: the row names the action.
        return self._decoded_due(row)

    def _decoded_due(self, row: bytes) -> int | None:
        return due_ms(RowDeadline(decode_values(row)), self._policy)


def apply_records(store: PartitionStore, records: Iterable[changelog.ChangelogRecord],
                  committed: changelog.Positions, group: str, policy: Policy,
                  end_offset: int | None = None, start: int | None = None) -> RestoreStats:
    """Apply the committed records of ``group`` (read from offset ``start``, by default the
    store's) to ``store``; the store then reflects the changelog up to ``end_offset``
    (default: after the last record)."""
    applier = _Applier(store, committed, group, policy,
                       store.changelog_offset if start is None else start)
    for record in records:
        applier.add(record)
    return applier.finish(end_offset)


def restore_partitions(consumer: Consumer, topic: str, stores: dict[int, PartitionStore],
                       committed: dict[int, changelog.Positions], group: str, policy: Policy,
                       ends: Consumer, timeout_s: float = 600.0,
                       home_count: int | None = None) -> RestoreStats:
    """Catch every store up from ``topic`` (the changelog), all partitions in one pass,
    with ``consumer``: a client of its own (assigned, never subscribed, read_committed).

    The end read to is each partition's high watermark when the restore begins, asked of
    ``ends`` (a read_uncommitted client: ``consumer``'s own end is the read-committed one).
    A transaction still open there (a
    previous owner's, killed or paused mid-batch) holds the read-committed end back, and
    batches a later owner committed after it lie beyond: the restore waits until the
    coordinator ends that transaction (``transaction.timeout.ms`` at most) rather than stop
    before them. Raises ProcessorError on a Kafka error or when the ends are not reached in
    time."""
    started = time.monotonic()
    appliers: dict[int, _Applier] = {}
    try:
        ends_of = {p: end_offset(ends, TopicPartition(topic, p)) for p in stores}
        waited = [time.monotonic() - started]
        starts = {}
        for partition, store in stores.items():
            start = store.changelog_offset
            if start > ends_of[partition]:
                # The store is ahead of its changelog (the topic was recreated): read it all.
                logger.warning("state store ahead of its changelog; reading all of it",
                               extra=log_fields(partition=partition, store_offset=start,
                                                end=ends_of[partition]))
                start = 0
            starts[partition] = start
            appliers[partition] = _Applier(store, committed[partition], group, policy, start,
                                           home_count)
        for fetched_now in _read(consumer, topic, starts, ends_of, started + timeout_s,
                                 waited):
            for msg in fetched_now:  # the hot loop: one pass per changelog record
                # _read raised for an error record: every one here has its position.
                appliers[msg.partition()].add_consumed(  # type: ignore[index]
                    msg.offset(), msg.key(), msg.value(), msg.headers())  # type: ignore[arg-type]
        stats = RestoreStats()
        for partition, applier in appliers.items():
            done = applier.finish(ends_of[partition])
            stats.applied += done.applied
            stats.skipped += done.skipped
    except KafkaException as exc:
        raise ProcessorError(f"restoring from {topic} failed: {exc.args[0].str()}") from exc
    finally:
        consumer.unassign()
    stats.seconds = time.monotonic() - started
    stats.waited = waited[0]
    return stats


def _read(consumer: Consumer, topic: str, starts: dict[int, int], ends: dict[int, int],
          deadline: float, waited: list[float]) -> Iterator[list[Message]]:
    """The records from ``starts`` to ``ends``, as the client fetched them (a list at a
    time); KafkaException for an error record. ``waited[0]`` adds up the time spent in the
    client's poll: waiting for records, not applying them."""
    todo = [TopicPartition(topic, p, starts[p]) for p in starts if starts[p] < ends[p]]
    if not todo:
        return
    consumer.assign(todo)
    tps = [TopicPartition(topic, tp.partition) for tp in todo]
    # Positions, not the last offsets read: transaction markers take offsets that are
    # never delivered.
    quiet_since, told = time.monotonic(), False
    while behind := [tp.partition for tp in consumer.position(tps)
                     if tp.offset < ends[tp.partition]]:
        now = time.monotonic()
        if now > deadline:
            raise ProcessorError(f"restoring from {topic}: the end was not reached in time")
        if not told and now - quiet_since > WAIT_NOTICE_S:
            told = True
            logger.info("restore waiting for the changelog's open transactions to end "
                        "(a previous owner's, aborted by the coordinator at its timeout)",
                        extra=log_fields(partitions=behind))
        asked = time.monotonic()
        found = fetched(consumer, 5000, 0.2)
        waited[0] += time.monotonic() - asked
        for msg in found:
            if msg.error():
                raise KafkaException(msg.error())
        if found:
            quiet_since = now
        yield found
