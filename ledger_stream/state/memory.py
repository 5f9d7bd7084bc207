"""An in-memory :class:`PartitionStore`: for tests and for tools that need no durability.
Its content lives as long as the object."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from ledger_stream.state.base import PartitionStore, StoreBatch, TimerEntry


class MemoryPartitionStore(PartitionStore):
    def __init__(self, partition: int = 0) -> None:
        super().__init__(partition)
        self._rows: dict[str, bytes] = {}
        self._timers: list[TimerEntry] = []  # sorted
        self._clock = 0
        self._offset = 0

    def get(self, key: str) -> bytes | None:
        return self._rows.get(key)

    def write(self, batch: StoreBatch) -> None:
        self._rows.update(batch.rows)
        for entry in batch.timers_removed:
            at = bisect.bisect_left(self._timers, entry)
            if at < len(self._timers) and self._timers[at] == entry:
                del self._timers[at]
        for entry in batch.timers_added:
            at = bisect.bisect_left(self._timers, entry)
            if at == len(self._timers) or self._timers[at] != entry:
                self._timers.insert(at, entry)
        if batch.clock_ms is not None:
            self._clock = max(self._clock, batch.clock_ms)
        if batch.changelog_offset is not None:
            self._offset = batch.changelog_offset

    def due_timers(self, up_to_ms: int, after_ms: int = -1) -> Iterator[TimerEntry]:
        start = bisect.bisect_left(self._timers, (after_ms + 1, ""))
        for entry in list(self._timers[start:]):
            if entry[0] > up_to_ms:
                return
            yield entry

    def next_due(self, after_ms: int = -1) -> int | None:
        start = bisect.bisect_left(self._timers, (after_ms + 1, ""))
        return self._timers[start][0] if start < len(self._timers) else None

    @property
    def clock_ms(self) -> int:
        return self._clock

    @property
    def changelog_offset(self) -> int:
        return self._offset

    def close(self) -> None:
        pass
