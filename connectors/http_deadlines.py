"""Deadlines of HTTP exchanges in flight: the earliest first, the finished ones pruned.

An exchange that ends before its deadline (nearly all do) leaves its entry behind in a heap
that only pops from the top; with a 10 s deadline at 2,000 calls/s that was 20,000 dead
entries, each holding its exchange and connection. ``DeadlineHeap.discard`` counts them and
rebuilds the heap without them once they outnumber the live ones, so it holds at most about
twice the exchanges in flight, for O(1) amortised work per exchange. Only an entry still in
the heap counts: an item taken out by ``due`` (cut at its deadline), never pushed (it failed
as it started) or discarded twice does not, or the count would run ahead of the heap and
rebuild it more and more often.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Generic, Protocol, TypeVar

PRUNE_AT_LEAST = 64  # dead entries tolerated before a rebuild is worth its cost


class Watched(Protocol):
    @property
    def ended(self) -> bool: ...


class Cuttable(Watched, Protocol):
    def cut_off(self) -> bool | None: ...


T = TypeVar("T", bound=Watched)


class DeadlineHeap(Generic[T]):
    """Entries (deadline, item) earliest first; ``item.ended`` marks one finished. Not
    thread-safe: its owner serialises the calls."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, T]] = []
        self._order = itertools.count()
        # id(item) -> whether it has ended, for each item with an entry in the heap (the
        # heap holds the item, so its id is not reused meanwhile).
        self._held: dict[int, bool] = {}
        self._dead = 0  # entries in the heap whose item has ended

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, deadline: float, item: T) -> None:
        """Watch ``item`` (not in the heap already) until ``deadline``; one that has ended
        already (its answer was read before its writer got here) needs no watching: its
        discard came first and was not counted, so its entry would never be pruned."""
        if item.ended:
            return
        heapq.heappush(self._heap, (deadline, next(self._order), item))
        self._held[id(item)] = False

    def discard(self, item: T) -> None:
        """``item`` has ended (its ``ended`` is True now): its entry may go."""
        if self._held.get(id(item)) is not False:
            return  # not in the heap, or counted already
        self._held[id(item)] = True
        self._dead += 1
        if self._dead >= PRUNE_AT_LEAST and self._dead * 2 >= len(self._heap):
            self._heap = [entry for entry in self._heap if not entry[2].ended]
            heapq.heapify(self._heap)
            self._held = {id(entry[2]): False for entry in self._heap}
            self._dead = 0

    def next_at(self) -> float | None:
        """The earliest deadline of an item not ended, if any."""
        self._drop_ended()
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> list[T]:
        """The items not ended whose deadline is ``now`` or earlier, taken out."""
        out = []
        while self._heap and self._heap[0][0] <= now:
            _, _, item = heapq.heappop(self._heap)
            self._taken(item)
            if not item.ended:
                out.append(item)
        return out

    def _drop_ended(self) -> None:
        while self._heap and self._heap[0][2].ended:
            self._taken(heapq.heappop(self._heap)[2])

    def _taken(self, item: T) -> None:
        """``item``'s entry left the heap."""
        if self._held.pop(id(item), False):
            self._dead -= 1


class Deadlines:
    """One thread that cuts the exchanges still running at their deadline, so an exchange
    on a kept connection does its I/O in the caller's thread: a thread started per call
    cost more CPU than the call itself (about 150 µs of 800 per dispatch).

    ``watch`` when an exchange starts, ``release`` when it ends (its entry is pruned,
    ``DeadlineHeap``); the thread sleeps until the earliest deadline of one still running."""

    def __init__(self) -> None:
        self._heap: DeadlineHeap[Cuttable] = DeadlineHeap()
        self._changed = threading.Condition()
        self._wake_at = float("inf")
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        with self._changed:
            return len(self._heap)

    def watch(self, deadline: float, exchange: Cuttable) -> None:
        with self._changed:
            self._heap.push(deadline, exchange)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="http-deadlines",
                                                daemon=True)
                self._thread.start()
            if deadline < self._wake_at:
                self._changed.notify()

    def release(self, exchange: Cuttable) -> None:
        """``exchange`` has ended: nothing to cut."""
        with self._changed:
            self._heap.discard(exchange)

    def _run(self) -> None:
        while True:
            with self._changed:
                due = self._heap.due(time.monotonic())
                if not due:
                    next_at = self._heap.next_at()
                    self._wake_at = float("inf") if next_at is None else next_at
                    self._changed.wait(None if next_at is None
                                       else max(next_at - time.monotonic(), 0.0))
                    self._wake_at = float("inf")
                    continue
            for exchange in due:
                exchange.cut_off()
