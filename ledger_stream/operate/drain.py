"""Draining a workflow version (CLI ``drain``): the keys still in flight under one graph
version, read from the processors' changelog.

The changelog (``<prefix>.changelog``) holds each key's latest state row, its workflow's
graph id and version among them (those of the intent that reserved the key). A key is in
flight while its phase is RESERVED, DISPATCHED, RECONCILING, NEEDS_OPERATOR or HELD
(``Phase.in_flight``): the target may still see an effect for it, or an operator must say
what happened. A HELD key waits for an unfreeze (the version's hold, or another freeze):
no effect runs for it, so it is listed apart (``Drain.held``) and does not keep the
version from being drained, unless the pre-grant of its first attempt may still be used
(its end, plus the clock-skew margin, not passed when the rows were read: its fencer calls
without waiting; operate/pregrants.py). A version is drained when none of its keys is in
flight.

The list is as of the changelog's committed records when the command read each partition:
a key reserved a moment later is not in it. Hold the version first (``drain --hold``, a
freeze by workflow version: domain/containment.py) so that the list can only shrink.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ledger_stream.config import Settings
from ledger_stream.domain.decide import pregrant_end
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.history.detail import shown_detail
from ledger_stream.kafka.receipts import partition_records
from ledger_stream.operate.containment import _partitions as partition_count
from ledger_stream.state.rows import decode_row

STATE_ROW_PREFIX = b"~"  # the changelog's own rows (clock, containment), not keys


@dataclass(frozen=True)
class InFlight:
    """One key in flight under the drained version, as its latest changelog row says."""

    key: str
    phase: str
    attempt: int
    since_ms: int
    detail: str  # redacted (history/detail.py)


@dataclass(frozen=True)
class Drain:
    """The keys in flight under (graph, version), by key; ``held``: its keys held by a
    freeze, waiting for the unfreeze; ``unreadable``: changelog rows that did not decode
    (their keys are not known to be settled)."""

    in_flight: tuple[InFlight, ...]
    unreadable: tuple[str, ...] = ()
    held: tuple[InFlight, ...] = ()


def in_flight(settings: Settings, bootstrap: str, graph: str, version: str,
              timeout_s: float = 30.0) -> Drain:
    """The keys whose latest state row names workflow (graph, version) and is in flight,
    and those of them held (see the module doc). KafkaSetupError when a partition cannot
    be read to its end within ``timeout_s``."""
    read_ms = int(time.time() * 1000)
    return judged(latest_rows(settings, bootstrap, timeout_s), graph, version, read_ms,
                  settings.processor.clock_skew_ms)


def judged(rows: Iterable[tuple[str, bytes]], graph: str, version: str, read_ms: int,
           skew_ms: int) -> Drain:
    """The drain of (graph, version) from each key's latest row, read from ``read_ms`` on
    (the wall clock): a held key whose first attempt's pre-grant end plus ``skew_ms`` is
    not before it is still in flight."""
    found: list[InFlight] = []
    held: list[InFlight] = []
    unreadable: list[str] = []
    for key, row in rows:
        try:
            state = decode_row(row)
        except (ValueError, TypeError, KeyError, IndexError):
            unreadable.append(key)
            continue
        if state.graph != graph or state.version != version or not state.phase.in_flight:
            continue
        waits = state.phase is Phase.HELD and pregrant_end(state) + skew_ms < read_ms
        (held if waits else found).append(_shown(state))
    return Drain(tuple(sorted(found, key=lambda k: k.key)), tuple(sorted(unreadable)),
                 tuple(sorted(held, key=lambda k: k.key)))


def latest_rows(settings: Settings, bootstrap: str, timeout_s: float
                ) -> Iterator[tuple[str, bytes]]:
    """Each key's latest row in the changelog (a deleted key's none), partition by partition."""
    topic = settings.topic("changelog")
    for partition in range(partition_count(bootstrap, topic)):
        rows: dict[str, bytes | None] = {}
        for record in partition_records(
                bootstrap, topic, lambda _, p=partition: p,  # type: ignore[misc]
                lambda k: k is not None and not k.startswith(STATE_ROW_PREFIX), timeout_s):
            rows[(record.key or b"").decode("utf-8", "replace")] = record.value
        yield from ((k, v) for k, v in rows.items() if v is not None)


def _shown(state: KeyState) -> InFlight:
    # The detail may quote a target's error text: shown by its length only, as elsewhere.
    return InFlight(state.key, state.phase.value, state.attempt, state.phase_since_ms,
                    shown_detail(state.status_detail))


def as_json(item: InFlight, in_flight: bool = True) -> str:
    """``in_flight`` false: a held key, waiting for the unfreeze."""
    return json.dumps({"key": item.key, "phase": item.phase, "attempt": item.attempt,
                       "since_ms": item.since_ms, "detail": item.detail,
                       "in_flight": in_flight}, sort_keys=True)
