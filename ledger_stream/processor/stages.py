"""Where a batch's wall time goes, stage by stage, with the collector's pauses inside it.

A batch of the loop (runtime.py, checkpoint.py) passes through these stages, in order:

- ``poll``: the first record's poll (which waits while the inputs are quiet) and the drain
  of what the client already fetched;
- ``decide``: the stored states read (one multi-get per partition), then each record
  decoded, validated, decided and its outputs encoded;
- ``produce``: the outputs, Ticks and changelog records handed to the producer;
- ``flush``: waiting until the brokers confirmed them (exactly once: the transaction's
  flush; at least once: every delivery report);
- ``commit``: the input offsets committed (exactly once: the transaction committed);
- ``store``: the overlays written to the local stores.

:class:`BatchClock` reads the clock once per stage boundary (eight ``perf_counter`` reads a
batch, whatever its size). :class:`StageLog` keeps what the committed batches spent, observes
each stage as ``ledger_batch_stage_seconds{stage}``, and every ``every_s`` logs one line,
``batch stages``, with the window's mean per batch and share of the wall time per stage,
each stage's longest, the slowest batch's own breakdown, and the collector's pauses (which
fall inside the stages: a pause is time of whichever stage it interrupted). Abandoned batches
are not counted (their records are decided again and counted then).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import Histogram

from ledger_stream.logs import log_fields
from ledger_stream.processor import collector

logger = logging.getLogger(__name__)

STAGES = ("poll", "decide", "produce", "flush", "commit", "store")
LOG_EVERY_S = 10.0

STAGE_SECONDS = Histogram(
    "ledger_batch_stage_seconds",
    "Wall time of one committed batch in each stage of the loop (poll, decide, produce, "
    "flush, commit, store)", ["stage"],
    buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))


class BatchClock:
    """The stage times of the batch in flight: :meth:`start` as its poll begins, then
    :meth:`lap` at the end of each stage (the time since the previous lap goes to it)."""

    __slots__ = ("_gc_at", "_last", "seconds")

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self._last = time.perf_counter()
        self._gc_at = collector.paused()

    def start(self) -> None:
        for stage in STAGES:
            self.seconds[stage] = 0.0
        self._gc_at = collector.paused()
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] += now - self._last
        self._last = now

    def gc_since_start(self) -> tuple[int, float]:
        """(collections, seconds paused) since :meth:`start`."""
        count, seconds = collector.paused()
        return count - self._gc_at[0], seconds - self._gc_at[1]


@dataclass
class Window:
    """What the committed batches of one logging window spent."""

    batches: int = 0
    records: int = 0
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    longest: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    slowest: dict[str, float] = field(default_factory=dict)
    slowest_s: float = 0.0
    gc_count: int = 0
    gc_s: float = 0.0
    gc_batch_max_s: float = 0.0

    def add(self, seconds: dict[str, float], records: int, gc: tuple[int, float]) -> None:
        self.batches += 1
        self.records += records
        wall = 0.0
        for stage, spent in seconds.items():
            self.seconds[stage] += spent
            if spent > self.longest[stage]:
                self.longest[stage] = spent
            wall += spent
        if wall > self.slowest_s:
            self.slowest_s, self.slowest = wall, dict(seconds)
        self.gc_count += gc[0]
        self.gc_s += gc[1]
        self.gc_batch_max_s = max(self.gc_batch_max_s, gc[1])

    def fields(self) -> dict[str, object]:
        """The structured log fields: milliseconds, rounded to µs; shares of the wall time
        the window's batches took (poll included)."""
        wall = sum(self.seconds.values())

        def ms(value: float) -> float:
            return round(value * 1000, 3)

        return {
            "batches": self.batches, "records": self.records,
            "wall_ms": ms(wall),
            "mean_ms": {s: ms(v / self.batches) for s, v in self.seconds.items()},
            "share": {s: round(v / wall, 4) if wall else 0.0 for s, v in self.seconds.items()},
            "max_ms": {s: ms(v) for s, v in self.longest.items()},
            "slowest_batch_ms": {s: ms(v) for s, v in self.slowest.items()},
            "gc_pauses": self.gc_count, "gc_ms": ms(self.gc_s),
            "gc_batch_max_ms": ms(self.gc_batch_max_s),
        }


class StageLog:
    """Counts each committed batch's stages; logs a window every ``every_s`` seconds."""

    def __init__(self, every_s: float = LOG_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._window = Window()
        self._since = clock()
        self._observe = {stage: STAGE_SECONDS.labels(stage).observe for stage in STAGES}

    def committed(self, batch_clock: BatchClock, records: int) -> None:
        """Count the batch ``batch_clock`` timed (``records`` inputs); log the window when
        it is ``every_s`` old."""
        seconds = batch_clock.seconds
        for stage, observe in self._observe.items():
            observe(seconds[stage])
        self._window.add(seconds, records, batch_clock.gc_since_start())
        if self._clock() - self._since >= self.every_s:
            self.flush()

    def flush(self) -> dict[str, object] | None:
        """Log the window so far (if it holds a batch) and start a new one; its fields."""
        window, self._window, self._since = self._window, Window(), self._clock()
        if not window.batches:
            return None
        fields = window.fields()
        logger.info("batch stages", extra=log_fields(**fields))
        return fields
