"""Observed steps: results read from outside that change nothing there (a model's answer, a
retrieval, a price lookup), kept as evidence beside the effects that follow them.

An agent's effect is decided by what it read: the refund amount the model proposed, the
price the lookup returned. A re-run of a step from a checkpoint (a replay, a fork, a resume)
may read something else and still ask for the same key with the same arguments, which the
ledger answers with the original receipt: correct, yet the reasons behind the repeat
changed. So each intent carries the observations of its step (``Intent.observations``): the
source, the model, the trace, and the SHA-256 and size of the result's canonical encoding,
never the result itself.

On a key's history, an intent whose observation of a source differs from the first one the
same thread recorded for that source is **flagged** (``observation_changes``): shown on the
timeline and in the evidence, never a reason to refuse or hold anything. Pure: no I/O, no
clock.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ledger_stream.domain.events import Intent, Observation
from ledger_stream.domain.keys import canonical_json

# Bounds an intent's observations must keep (validation.py): evidence, not a data channel.
MAX_OBSERVATIONS = 16
MAX_TEXT = 256
_DIGEST = re.compile(r"[0-9a-f]{64}")
FLAG = "observation_changed"


def encoded(value: Any) -> bytes:
    """The canonical encoding of a JSON value (sorted keys, normalised numbers, UTF-8): the
    bytes an observation's digest and size are of. TypeError or ValueError for a value
    without one (non-JSON types, non-text object keys, NaN)."""
    return canonical_json(value).encode("utf-8")


def observe(source: str, value: Any, *, model: str = "", trace_id: str = "", node: str = "",
            step: int = -1) -> Observation:
    """The observation of ``value`` (a JSON value) read from ``source``: its digest and size
    only. Equal values give equal digests whatever their key order or number spelling.
    Texts longer than an intent may carry are cut to ``MAX_TEXT``, so evidence never makes
    an intent invalid."""
    raw = encoded(value)
    return Observation(source=source[:MAX_TEXT], digest=hashlib.sha256(raw).hexdigest(),
                       size=len(raw), model=model[:MAX_TEXT], trace_id=trace_id[:MAX_TEXT],
                       node=node[:MAX_TEXT], step=step)


def observation_problem(observations: tuple[Observation, ...]) -> str | None:
    """Why an intent's observations are invalid (the field named, never a value), or None."""
    if len(observations) > MAX_OBSERVATIONS:
        return f"more than {MAX_OBSERVATIONS} observations"
    for o in observations:
        if not o.source:
            return "an observation has no source"
        if not _DIGEST.fullmatch(o.digest):
            return "an observation's digest is not a hex SHA-256"
        if o.size < 0:
            return "an observation's size is negative"
        if max(len(o.source), len(o.model), len(o.trace_id), len(o.node)) > MAX_TEXT:
            return f"an observation's source, model, trace_id or node exceeds {MAX_TEXT} characters"
    return None


@dataclass(frozen=True)
class ObservationChange:
    """A source whose result differs from what the same thread recorded first."""

    source: str
    digest: str  # now
    size: int
    first_digest: str  # what the first intent recorded
    first_size: int
    first_intent_id: str  # the intent that recorded it

    def describe(self) -> str:
        return (f"{FLAG}: {self.source} {self.digest[:12]} ({self.size} B), first "
                f"{self.first_digest[:12]} ({self.first_size} B) in intent "
                f"{self.first_intent_id}")


def observation_changes(intents: Iterable[Intent]) -> dict[str, tuple[ObservationChange, ...]]:
    """For ``intents`` of one key in the ledger's order, the changes each one carries, by
    intent event id (intents without a change are absent). An observation is compared with
    the first one of the same source in the same thread: another thread is another
    conversation, whose reads differ by design. An intent without an observation of a
    source is not flagged for it: there is nothing to compare."""
    first: dict[tuple[str, str], tuple[Observation, str]] = {}
    changes: dict[str, tuple[ObservationChange, ...]] = {}
    for intent in intents:
        found = []
        for o in intent.observations:
            where = (intent.workflow.thread_id, o.source)
            if where not in first:
                first[where] = (o, intent.event_id)
                continue
            was, by = first[where]
            if (was.digest, was.size) != (o.digest, o.size):
                found.append(ObservationChange(o.source, o.digest, o.size, was.digest,
                                               was.size, by))
        if found:
            changes[intent.event_id] = tuple(found)
    return changes


def shown(o: Observation) -> str:
    """One observation as a timeline shows it: source, model, digest prefix, size."""
    model = f" {o.model}" if o.model else ""
    return f"{o.source}{model} {o.digest[:12]} ({o.size} B)"
