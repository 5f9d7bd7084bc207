"""The changelog topic's records: the state store's backup, one compacted topic
``<prefix>.changelog`` with the input topics' partition count.

One record per key a batch changed (key: the operation key, value: its row), and one for the
partition clock (key ``~clock``) when the batch moved it; always in the partition of the
state. Headers name the batch that wrote the record: the consumer group, and the next input
offsets of intents-p and attempts-p that the batch commits. Restore applies a record only
when its batch was committed (both positions at or below the group's committed offsets):
a record of a batch that crashed before its commit is skipped, since those inputs are
decided again.

A key's row also carries its deadline basis (``ledger.due.v2``: the kind's letter and the
base time, ``-`` for none; ``domain.deadlines.deadline_basis``), so restore indexes its timer
without decoding the row. Rows written before that header existed are decoded instead. The
header's name carries the version of ``deadline_basis``: a change to which states have a
deadline, or what it counts from, must bump it (``DUE``), so restore decodes the rows older
processors wrote instead of trusting their basis, and an older processor, which reads only
the name it knows, decodes the rows a newer one wrote. v2 (2026-12-07): a pre-grant's
deadline at its end plus the skew margin (``p``), a fenced holder's at its lease's (``f``);
a ``ledger.due.v1`` row is decoded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ledger_stream.domain.deadlines import KINDS, DeadlineBasis

CLOCK_KEY = b"~clock"
CONTAINMENT_KEY = "~containment"  # the row of the partition's freezes and held keys
TICK_KEY = b"~tick"  # the key of Tick records on ledger.attempts
GROUP = "ledger.group"
INTENTS = "ledger.intents.next"
ATTEMPTS = "ledger.attempts.next"
DUE = "ledger.due.v2"  # bump with any change to domain.deadlines.deadline_basis
MAX_BASE_MS = 2**62  # a base time past this is not one a processor wrote
NO_DUE = b"-"

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
    due: bytes | None = None  # the row's deadline basis header, as written (None: absent)


def headers(group: str, positions: Positions) -> Headers:
    return [(GROUP, group.encode()), (INTENTS, b"%d" % positions.intents),
            (ATTEMPTS, b"%d" % positions.attempts)]


def due_header(basis: DeadlineBasis | None) -> tuple[str, bytes]:
    return DUE, NO_DUE if basis is None else b"%s%d" % (basis[0].encode(), basis[1])


def parse_due(data: bytes) -> DeadlineBasis | None:
    """The basis a ``ledger.due`` value names (a kind letter, then the base time in
    decimal digits); ValueError when it is not one this code writes."""
    if data == NO_DUE:
        return None
    kind, digits = data[:1].decode("ascii"), data[1:]
    if kind not in KINDS or not digits.isdigit() or len(digits) > 19:
        raise ValueError(f"not a deadline basis: {data[:40]!r}")
    base = int(digits)
    if base > MAX_BASE_MS:
        raise ValueError(f"a deadline base past {MAX_BASE_MS}: {base}")
    return kind, base


def clock_value(clock_ms: int) -> bytes:
    return b"%d" % clock_ms


class Changes(Protocol):
    """What a batch changed in one partition (processor.partition.PartitionOverlay)."""

    clock: int

    @property
    def clock_moved(self) -> bool: ...

    def rows(self) -> dict[str, bytes]: ...

    def row_dues(self) -> dict[str, tuple[str, bytes]]: ...


def records(group: str, positions: Positions, changes: Changes
            ) -> list[tuple[bytes, bytes, Headers]]:
    """The changelog records (key, value, headers) of one partition's batch: a row per
    changed key (its deadline basis beside it, but for the containment row), then the
    clock when it moved. Every record names the batch (``headers``)."""
    batch = headers(group, positions)
    dues = changes.row_dues()
    found = [(key.encode("utf-8"), row, batch if (due := dues.get(key)) is None
              else [*batch, due]) for key, row in changes.rows().items()]
    if changes.clock_moved:
        found.append((CLOCK_KEY, clock_value(changes.clock), batch))
    return found


HeaderValue = str | bytes | None


def parse(offset: int, key: bytes | None, value: bytes | None,
          raw_headers: Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None,
          ) -> ChangelogRecord:
    """A changelog record from its Kafka parts (headers as the client gives them). A record
    without our headers (written by something else) parses with an empty group, so restore
    skips it. One pass over the headers: restore parses every changelog record."""
    group: str | bytes = b""
    intents: str | bytes = b"-1"
    attempts: str | bytes = b"-1"
    due: str | bytes | None = None
    if type(raw_headers) is list:  # what a consumed record gives: the fast path
        items: Iterable[tuple[str, HeaderValue]] = raw_headers
    elif isinstance(raw_headers, Mapping):
        items = raw_headers.items()
    else:
        items = raw_headers or ()
    for name, data in items:
        if data is None:
            continue
        if name == INTENTS:
            intents = data
        elif name == ATTEMPTS:
            attempts = data
        elif name == GROUP:
            group = data
        elif name == DUE:
            due = data
    try:
        positions = Positions(int(intents), int(attempts))
    except ValueError:
        return ChangelogRecord(offset, key or b"", value, "", Positions())
    text = group.decode("utf-8", "replace") if isinstance(group, bytes) else group
    return ChangelogRecord(offset, key or b"", value, text, positions,
                           due.encode() if isinstance(due, str) else due)
