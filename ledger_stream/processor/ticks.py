"""When to append a Tick: to each owned partition that received no record for a tick
interval. The wall clock only decides *when* a Tick is written; the time it carries into
decisions is its broker timestamp, read back like any record."""

from __future__ import annotations


class Ticker:
    def __init__(self, interval_ms: int) -> None:
        self._interval = interval_ms
        self._last: dict[int, float] = {}  # partition -> wall ms of its last record or tick

    def seen(self, partition: int, wall_ms: float) -> None:
        self._last[partition] = wall_ms

    def forget(self, partition: int) -> None:
        self._last.pop(partition, None)

    def due(self, owned: list[int], wall_ms: float) -> list[int]:
        """Owned partitions quiet for an interval; each is counted as ticked now."""
        quiet = [p for p in owned if wall_ms - self._last.setdefault(p, wall_ms)
                 >= self._interval]
        for partition in quiet:
            self._last[partition] = wall_ms
        return quiet
