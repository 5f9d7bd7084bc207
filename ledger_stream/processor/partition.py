"""One partition's state during one batch: an in-memory overlay over its store.

The overlay holds the keys the batch changed, the partition clock and the timers that fired.
Nothing reaches the store until the checkpoint writes :meth:`PartitionOverlay.store_batch`
(step d, after the commit); dropping the object abandons everything it holds.

The clock is the partition clock: the largest broker timestamp decided so far on intents-p
and attempts-p, persisted with the state, so a replay decides at the same times. Timers come
from the store's timer index and from the overlay's own new deadlines; they fire in
``(due_ms, key)`` order, each key at most once per clock advance.
"""

from __future__ import annotations

import heapq
import json
import logging

from ledger_stream.domain import containment as contain
from ledger_stream.domain.deadlines import deadline_basis, due_ms
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, absent
from ledger_stream.logs import log_fields
from ledger_stream.processor.changelog import CONTAINMENT_KEY, due_header
from ledger_stream.state import PartitionStore, StoreBatch, TimerEntry, decode_row

logger = logging.getLogger(__name__)



class PartitionOverlay:
    def __init__(self, store: PartitionStore, policy: Policy) -> None:
        self.store = store
        self.partition = store.partition
        self._policy = policy
        self.clock = store.clock_ms
        self._start_clock = self.clock
        self._changed: dict[str, KeyState] = {}
        self._encoded: dict[str, bytes] = {}  # each changed key's row, as put
        # The due of each changed key's stored state (and of keys read without a row: none)
        self._stored_due: dict[str, int | None] = {}
        self._due: dict[str, int | None] = {}  # due of each changed key's current state
        self._fired: set[TimerEntry] = set()
        self._heap: list[TimerEntry] = []  # deadlines of changed keys (stale ones skipped)
        self._scanned_to = -1  # store entries due up to here were handled in this batch
        self._store_next = store.next_due()
        self._rows: dict[str, bytes] | None = None
        self._containment: contain.Containment | None = None
        self._containment_changed = False
        self._read: dict[str, KeyState] = {}  # the store's states read in this batch

    def read_ahead(self, keys: list[str]) -> None:
        """Read the stored states of ``keys`` in one multi-get (the batch's records' keys,
        before their decisions): the store does not change until the checkpoint's last
        step, so what it returns now is what a read during the batch would."""
        wanted = [key for key in dict.fromkeys(keys)  # a key twice in a batch: read once
                  if key not in self._read and key not in self._changed]
        for key, row in zip(wanted, self.store.get_many(wanted), strict=True):
            if row is None:  # no row, so no timer entry in the store's index either
                self._read[key] = absent(key)
                self._stored_due[key] = None
            else:
                self._read[key] = decode_row(row)

    # -- the StateView of the step ------------------------------------------------------

    def state(self, key: str) -> KeyState:
        found = self._changed.get(key)
        if found is None:
            found = self._read.get(key)
        if found is not None:
            return found
        row = self.store.get(key)
        state = self._read[key] = decode_row(row) if row is not None else absent(key)
        return state

    def changed_states(self) -> dict[str, KeyState]:
        """The keys this batch changed so far (a copy)."""
        return dict(self._changed)

    def put(self, key: str, before: KeyState, after: KeyState, row: bytes) -> None:
        """``after`` replaces ``before``; ``row``: its encoded row, the bytes the checkpoint
        writes (the step encoded it to check its size, so it is not encoded again)."""
        if key not in self._changed and key not in self._stored_due:
            self._stored_due[key] = due_ms(before, self._policy)
        self._changed[key] = after
        self._encoded[key] = row
        # Computed once per state: the timers, the store's index and the heap read it here.
        due = self._due[key] = due_ms(after, self._policy)
        if due is not None:
            heapq.heappush(self._heap, (due, key))

    def containment(self) -> contain.Containment:
        if self._containment is None:
            row = self.store.get(CONTAINMENT_KEY)
            self._containment = (contain.Containment.from_row(json.loads(row))
                                 if row is not None else contain.NONE)
        return self._containment

    def put_containment(self, containment: contain.Containment) -> None:
        self._containment = containment
        self._containment_changed = True
        self._rows = None

    # -- time ----------------------------------------------------------------------------

    def advance(self, timestamp_ms: int) -> None:
        if timestamp_ms > self.clock:
            self.clock = timestamp_ms

    def due_now(self) -> list[TimerEntry]:
        """The timers due at the current clock that have not fired in this batch."""
        clock = self.clock
        store_due = self._store_next is not None and self._store_next <= clock
        heap_due = bool(self._heap) and self._heap[0][0] <= clock
        if not (store_due or heap_due):
            return []
        found: list[TimerEntry] = []
        if store_due:
            for entry in self.store.due_timers(clock, self._scanned_to):
                # A changed key's own deadline is in the heap; its stored entry is stale.
                if entry[1] not in self._changed and entry not in self._fired:
                    found.append(entry)
            self._scanned_to = clock
            self._store_next = self.store.next_due(clock)
        while self._heap and self._heap[0][0] <= clock:
            due, key = heapq.heappop(self._heap)
            if self._due[key] == due and (due, key) not in self._fired:
                found.append((due, key))
        found.sort()
        self._fired.update(found)
        return found

    # -- what the checkpoint writes ----------------------------------------------------------

    @property
    def changed(self) -> bool:
        return bool(self._changed) or bool(self._fired) or self.clock != self._start_clock \
            or self._containment_changed

    @property
    def clock_moved(self) -> bool:
        return self.clock != self._start_clock

    def rows(self) -> dict[str, bytes]:
        """The changed keys' rows, encoded once for the changelog and the store."""
        if self._rows is None:
            self._rows = dict(self._encoded)
            if self._containment_changed:
                self._rows[CONTAINMENT_KEY] = json.dumps(
                    self.containment().to_row(), separators=(",", ":"),
                    ensure_ascii=False).encode()
        return self._rows

    def row_dues(self) -> dict[str, tuple[str, bytes]]:
        """Each changed key's deadline basis, as the header beside its changelog row."""
        return {key: due_header(deadline_basis(state)) for key, state in self._changed.items()}

    def store_batch(self, changelog_offset: int | None) -> StoreBatch:
        removed = set(self._fired)
        added: set[TimerEntry] = set()
        for key, due in self._due.items():
            before = self._stored_due.get(key)
            if before is not None:
                removed.add((before, key))
            if due is not None:
                added.add((due, key))
        for due_fired, key in self._fired:
            if key not in self._changed:
                added |= self._unchanged_timer(key, due_fired)
        return StoreBatch(self.rows(), removed, added, self.clock, changelog_offset)

    def _unchanged_timer(self, key: str, due_fired: int) -> set[TimerEntry]:
        """The index entry of a key whose timer fired without changing it (an entry left by
        another policy): its current deadline, never the one that just fired."""
        due = due_ms(self.state(key), self._policy)
        if due is None:
            return set()
        if due == due_fired:
            logger.warning("timer changed nothing; dropped", extra=log_fields(
                key=key, due_ms=due, partition=self.partition))
            return set()
        return {(due, key)}
