"""Draining a workflow version (CLI ``drain``): the keys still in flight under one graph
version, read from the processors' changelog.

The changelog (``<prefix>.changelog``) holds each key's latest state row, its workflow's
graph id and version among them (those of the intent that reserved the key). A key is in
flight while its phase is RESERVED, DISPATCHED, RECONCILING, NEEDS_OPERATOR or HELD
(``Phase.in_flight``): the target may still see an effect for it, or an operator must say
what happened. A version is drained when none of its keys is.

The list is as of the changelog's committed records when the command read each partition:
a key reserved a moment later is not in it. Hold the version first (``drain --hold``, a
freeze by workflow version: domain/containment.py) so that the list can only shrink.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from ledger_stream.config import Settings
from ledger_stream.domain.state import KeyState
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
    """The keys in flight under (graph, version), by key; ``unreadable``: changelog rows
    that did not decode (their keys are not known to be settled)."""

    in_flight: tuple[InFlight, ...]
    unreadable: tuple[str, ...] = ()


def in_flight(settings: Settings, bootstrap: str, graph: str, version: str,
              timeout_s: float = 30.0) -> Drain:
    """The keys whose latest state row names workflow (graph, version) and is in flight.
    KafkaSetupError when a partition cannot be read to its end within ``timeout_s``."""
    found: list[InFlight] = []
    unreadable: list[str] = []
    for key, row in latest_rows(settings, bootstrap, timeout_s):
        try:
            state = decode_row(row)
        except (ValueError, TypeError, KeyError, IndexError):
            unreadable.append(key)
            continue
        if state.graph == graph and state.version == version and state.phase.in_flight:
            found.append(_shown(state))
    return Drain(tuple(sorted(found, key=lambda k: k.key)), tuple(sorted(unreadable)))


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


def as_json(item: InFlight) -> str:
    return json.dumps({"key": item.key, "phase": item.phase, "attempt": item.attempt,
                       "since_ms": item.since_ms, "detail": item.detail}, sort_keys=True)
