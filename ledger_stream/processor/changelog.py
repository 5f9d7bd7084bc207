"""The changelog topic's records: the state store's backup, one compacted topic
``<prefix>.changelog`` with the input topics' partition count.

One record per key a batch changed (key: the operation key, value: its row), and one for the
partition clock (key ``~clock``) when the batch moved it; always in the partition of the
state. Headers name the batch that wrote the record: the consumer group, and the next input
offsets of intents-p and attempts-p that the batch commits. Restore applies a record only
when its batch was committed (both positions at or below the group's committed offsets):
a record of a batch that crashed before its commit is skipped, since those inputs are
decided again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CLOCK_KEY = b"~clock"
CONTAINMENT_KEY = "~containment"  # the row of the partition's freezes and held keys
TICK_KEY = b"~tick"  # the key of Tick records on ledger.attempts
GROUP = "ledger.group"
INTENTS = "ledger.intents.next"
ATTEMPTS = "ledger.attempts.next"

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Positions:
    """Next input offsets of one state partition (-1: none known)."""

    intents: int = -1
    attempts: int = -1

    def covered_by(self, committed: Positions) -> bool:
        return self.intents <= committed.intents and self.attempts <= committed.attempts


@dataclass(frozen=True, slots=True)
class ChangelogRecord:
    offset: int
    key: bytes
    value: bytes | None
    group: str
    positions: Positions


def headers(group: str, positions: Positions) -> Headers:
    return [(GROUP, group.encode()), (INTENTS, b"%d" % positions.intents),
            (ATTEMPTS, b"%d" % positions.attempts)]


def clock_value(clock_ms: int) -> bytes:
    return b"%d" % clock_ms


def parse(offset: int, key: bytes | None, value: bytes | None,
          raw_headers: Sequence[tuple[str, bytes | None]] | None) -> ChangelogRecord:
    """A changelog record from its Kafka parts. A record without our headers (written by
    something else) parses with an empty group, so restore skips it."""
    found = {name: data for name, data in raw_headers or () if data is not None}
    try:
        positions = Positions(int(found.get(INTENTS, b"-1")), int(found.get(ATTEMPTS, b"-1")))
    except ValueError:
        return ChangelogRecord(offset, key or b"", value, "", Positions())
    group = found.get(GROUP, b"").decode("utf-8", "replace")
    return ChangelogRecord(offset, key or b"", value, group, positions)
