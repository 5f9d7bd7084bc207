"""The processor's per-partition state store: a small interface with two implementations
(``memory`` for tests, ``rocksdb`` for the product), checked by one contract test suite.

A store holds, for one state partition:

- one row per operation key (the ``KeyState.to_row()`` JSON, as bytes);
- the timer index: ``(due_ms, key)`` entries, derived from the rows (``due_ms(state)``), so
  it needs no changelog of its own and is rebuilt whenever rows are restored;
- the partition clock (the largest broker timestamp the partition has decided at);
- the changelog offset it reflects: every changelog record before it is in the store.

Guarantees: :meth:`PartitionStore.write` applies a whole :class:`StoreBatch` or nothing
(timer removals before additions, so one batch may move a key's entry); reads see only
written batches; :meth:`due_timers` yields entries in ``(due_ms, key)`` order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

TimerEntry = tuple[int, str]  # (due_ms, operation key)


@dataclass(frozen=True, slots=True)
class StoreBatch:
    """Everything one checkpoint (or one restore chunk) writes to one partition's store.

    ``clock_ms`` and ``changelog_offset`` of None leave the stored values unchanged; a
    clock never moves back (the larger of the stored and the given value is kept).
    """

    rows: Mapping[str, bytes] = field(default_factory=dict)
    timers_removed: Collection[TimerEntry] = ()
    timers_added: Collection[TimerEntry] = ()
    clock_ms: int | None = None
    changelog_offset: int | None = None


class PartitionStore(ABC):
    """The state of one partition of ``ledger.intents`` + ``ledger.attempts``."""

    def __init__(self, partition: int) -> None:
        self.partition = partition

    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """The key's row, or None when the key has none."""

    def get_many(self, keys: list[str]) -> list[bytes | None]:
        """The rows of ``keys``, in their order (None where a key has none)."""
        return [self.get(key) for key in keys]

    @abstractmethod
    def write(self, batch: StoreBatch) -> None:
        """Apply ``batch`` atomically. Raises StoreError (nothing applied) on failure."""

    @abstractmethod
    def due_timers(self, up_to_ms: int, after_ms: int = -1) -> Iterator[TimerEntry]:
        """Timer entries with ``after_ms < due_ms <= up_to_ms``, in ``(due_ms, key)`` order."""

    @abstractmethod
    def next_due(self, after_ms: int = -1) -> int | None:
        """The earliest ``due_ms`` greater than ``after_ms``, or None."""

    @property
    @abstractmethod
    def clock_ms(self) -> int:
        """The partition clock (0 for a new partition)."""

    @property
    @abstractmethod
    def changelog_offset(self) -> int:
        """The first changelog offset not reflected in the store (0 for a new one)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store (a second call does nothing); a closed store is not used
        again."""
