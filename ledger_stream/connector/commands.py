"""What the connector core asks its driver to do, and what it is told back.

The core (``core.py``) is the connector protocol (docs/design.md) without I/O: it never reads
Kafka, calls a target or looks at a clock. Its driver (``runtime.py`` on Kafka and threads, or
the simulation in ``ledger_lab/simulation``) turns these commands into effects and reports
their results, so the same protocol code runs in production and under simulated faults.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain import events as ev


@dataclass(frozen=True, slots=True)
class Record:
    """One record of ``ledger.dispatch`` as read: ``event`` is None when undecodable.

    ``backlog``: the record was already in the partition when this instance was assigned
    it (offset below the high watermark at assignment), i.e. it may be long settled.
    ``timestamp_ms``: the broker's timestamp of the record. ``trace``: its trace headers
    (tracing.py).
    """

    partition: int
    offset: int
    event: object
    timestamp_ms: int = 0
    backlog: bool = False
    trace: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class Produce:
    """Produce ``event`` to ``ledger.attempts`` and report the acknowledgement with
    ``ConnectorCore.produced(job_id, ok, now_ms)``."""

    job_id: int
    event: ev.AttemptClaim | ev.AttemptOutcome | ev.ReconcileResult


@dataclass(frozen=True, slots=True)
class Call:
    """Apply the effect, bounded by ``timeout_s`` (the whole call); report with
    ``ConnectorCore.called(job_id, status, external_id, error, now_ms)``.

    ``start_by_ms``: the driver must not begin the call later than this (its own clock),
    since the lease would no longer cover it; it reports ``not_called`` instead. 0 means no
    limit (the fast path, which holds no grant). What is left between that last check and
    the request reaching the target is the one window no lease closes (a process frozen in
    between): see docs/protocol.md.
    """

    job_id: int
    request: EffectRequest
    timeout_s: float
    start_by_ms: int = 0


@dataclass(frozen=True, slots=True)
class Lookup:
    """Ask the target for the key's effect; report with ``ConnectorCore.looked_up``."""

    job_id: int
    key: str
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Commit:
    """Everything before ``offset`` in ``partition`` is handled: commit it."""

    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Fence:
    """Take a pre-granted dispatch: commit ``offset`` (the record's offset + 1) for
    ``partition`` in this member's group generation, only if the partition is assigned when
    the commit is asked; report its answer with ``ConnectorCore.fenced(job_id, ok,
    now_ms)``. The group coordinator accepts the commit only from a member of its current
    generation, and the partition's next owner starts reading at it: at most one owner
    fences a record."""

    job_id: int
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Stop:
    """An acknowledgement failed: stop without committing anything more. The records
    whose outcome was not recorded are read again by the partition's next owner."""

    reason: str


Command = Produce | Call | Lookup | Commit | Fence | Stop


@dataclass(frozen=True, slots=True)
class LookupAnswer:
    """What a lookup found: ``external_id`` (found), None (certainly absent), or
    ``unavailable`` with the error (the target could not tell)."""

    external_id: str | None = None
    unavailable: str = ""
