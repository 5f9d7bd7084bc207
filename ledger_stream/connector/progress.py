"""Bookkeeping of what a connector has handled: offsets it may commit, ids it has done.

Records are handled concurrently (one key at a time, many keys at once) but committed in
partition order: a partition's committed offset only ever moves past records that are
completely handled, so a crash re-reads everything whose outcome was not recorded.
"""

from __future__ import annotations

from collections import OrderedDict, deque

HANDLED_MEMORY = 100_000


class Remembered:
    """A bounded set of ids this instance already handled (oldest forgotten first)."""

    def __init__(self, limit: int = HANDLED_MEMORY) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit

    def __contains__(self, item: str) -> bool:
        return item in self._ids

    def add(self, item: str) -> None:
        self._ids[item] = None
        if len(self._ids) > self._limit:
            self._ids.popitem(last=False)


class PartitionProgress:
    """Offsets of one partition in the order read, and which are completely handled."""

    def __init__(self) -> None:
        self._order: deque[int] = deque()
        self._done: dict[int, bool] = {}
        self._last = -1

    def read(self, offset: int) -> bool:
        """Note a record read; False when it was read before (a consumer re-delivering what
        it already handed over must not be handled twice)."""
        if offset <= self._last:
            return False
        self._last = offset
        self._order.append(offset)
        self._done[offset] = False
        return True

    def finish(self, offset: int) -> int | None:
        """Mark ``offset`` handled; the offset to commit when the handled prefix grew."""
        if offset not in self._done:
            return None
        self._done[offset] = True
        advanced = None
        while self._order and self._done[self._order[0]]:
            advanced = self._order.popleft() + 1
            del self._done[advanced - 1]
        return advanced

    def frontier(self) -> int:
        """The commit point: the first offset read and not handled (or the next to read).
        Committing ``o + 1`` commits every offset before ``o`` too: a record may be fenced
        only while the frontier is its own offset."""
        return self._order[0] if self._order else self._last + 1

    def __len__(self) -> int:
        return len(self._order)
