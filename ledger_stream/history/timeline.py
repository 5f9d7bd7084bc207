"""One row per event of a key, from the events themselves (pure; no Kafka).

A row says what its event carries and nothing else: a field the event does not carry is
empty (``None``), never filled in from a neighbour. Rows are ordered by the ledger's own
clock: the broker's timestamp of an input (``LogAppendTime`` on intents and attempts) and
the partition clock an output was decided at, which is its input's broker timestamp. A
client's wall clock (an intent's ``at_ms``) never orders anything. Inside one millisecond,
inputs come before the outputs they caused, then the log offset decides.

An intent's observations (what its step read from outside: a model's answer, a lookup) are
shown as source, model, digest and size; an intent whose observation differs from the one
its thread recorded first for the key is flagged ``observation_changed`` (``flag``), a mark
for the review, never a decision (``domain/observations.py``).

A connector's error text is shown as its length, and a receipt's or alert's detail through
``detail.shown_detail``: a target's text is never repeated.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.domain.observations import observation_changes, shown
from ledger_stream.history.detail import shown_detail

# Roles whose broker timestamp (LogAppendTime) is the ledger's time of the record.
INPUT_ROLES = ("intents", "attempts", "audit")
# An audit record is written before the command it announces: first in its millisecond.
RANK = {"audit": -1, "intents": 0, "attempts": 1, "dispatch": 2, "receipts": 3, "alerts": 4,
        "dlq": 5}


@dataclass(frozen=True)
class Located:
    """An event (or None: the record did not decode) where the log has it."""

    role: str  # intents, attempts, dispatch, receipts, alerts, dlq, audit
    topic: str
    partition: int
    offset: int
    timestamp_ms: int  # the record's timestamp
    event: Any
    error: str = ""  # why ``event`` is None


@dataclass(frozen=True)
class TimelineRow:
    ledger_time_ms: int
    role: str
    partition: int
    offset: int
    event: str
    intent_event_id: str | None = None
    workflow: str | None = None  # graph@version
    thread: str | None = None
    node: str | None = None
    checkpoint: str | None = None  # the checkpoint behind the step (langgraph/origin.py)
    origin: str | None = None
    attempt: int | None = None
    claim_id: str | None = None
    connector: str | None = None
    dispatch_id: str | None = None
    external_id: str | None = None  # the target's id for the effect
    outcome: str | None = None
    receipt: str | None = None  # status/reason of a receipt
    next_state: str | None = None  # the key's state a receipt announces
    detail: str | None = None
    observed: str | None = None  # an intent's observations: source model digest (size)
    flag: str | None = None  # observation_changed: this re-run read something else

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ledger_time(located: Located) -> int:
    event = located.event
    if located.role in INPUT_ROLES or event is None or not hasattr(event, "at_ms"):
        return located.timestamp_ms
    return int(event.at_ms)


def timeline(records: list[Located]) -> list[TimelineRow]:
    rows = sorted(((_row(r), r.event) for r in records if not isinstance(r.event, ev.Tick)),
                  key=lambda p: (p[0].ledger_time_ms, RANK.get(p[0].role, 9), p[0].offset))
    changes = observation_changes(e for _, e in rows if isinstance(e, ev.Intent))
    return [replace(row, flag="; ".join(c.describe() for c in changes[e.event_id]))
            if isinstance(e, ev.Intent) and e.event_id in changes else row for row, e in rows]


def _row(r: Located) -> TimelineRow:
    base: dict[str, Any] = {"ledger_time_ms": ledger_time(r), "role": r.role,
                            "partition": r.partition, "offset": r.offset}
    e = r.event
    if e is None:
        return TimelineRow(**base, event="undecodable", detail=r.error or None)
    fields: dict[str, Any] = {"event": type(e).__name__}
    fields.update(_fields(e))
    present: dict[str, Any] = {k: (v if v != "" else None) for k, v in fields.items()}
    return TimelineRow(**base, **present)


def _fields(e: Any) -> dict[str, Any]:
    if isinstance(e, ev.Intent):
        return {"intent_event_id": e.event_id, "workflow": f"{e.workflow.graph}@"
                f"{e.workflow.version}", "thread": e.workflow.thread_id, "node": e.workflow.node,
                "checkpoint": e.workflow.checkpoint_id, "origin": e.origin.value,
                "detail": f"args {e.args_hash[:12]}"
                + (f", approval {e.approval.approval_id}" if e.approval else ""),
                "observed": ", ".join(shown(o) for o in e.observations)}
    if isinstance(e, ev.AttemptClaim):
        return {"attempt": e.attempt, "claim_id": e.claim_id, "connector": e.connector,
                "detail": f"lease {e.lease_ms} ms" + (", fenced" if e.fenced else "")}
    if isinstance(e, ev.AttemptOutcome):
        return {"attempt": e.attempt, "claim_id": e.claim_id, "outcome": e.status.value,
                "external_id": e.external_id, "detail": _error(e.error)}
    if isinstance(e, ev.ReconcileResult):
        return {"attempt": e.attempt, "claim_id": e.claim_id,
                "outcome": f"lookup {e.status.value}", "external_id": e.external_id,
                "detail": _error(e.error)}
    if isinstance(e, ev.OperatorResolution):
        return {"attempt": e.attempt, "outcome": f"operator {e.resolution.value}",
                "external_id": e.external_id, "detail": f"by {e.operator}"
                + (f": {e.note}" if e.note else "")}
    if isinstance(e, ev.Dispatch):
        return {"intent_event_id": e.intent_event_id, "attempt": e.attempt,
                "dispatch_id": e.dispatch_id, "detail": f"to {e.target}, args "
                f"{e.args_hash[:12]}, not before {e.not_before_ms}"
                + (f", pre-granted until {e.lease_until_ms}" if e.lease_until_ms else "")}
    if isinstance(e, ev.Grant | ev.Held):
        return {"attempt": e.attempt, "claim_id": e.claim_id,
                "detail": f"lease until {e.lease_until_ms}"}
    if isinstance(e, ev.Reconcile):
        return {"attempt": e.attempt, "claim_id": e.claim_id, "detail": f"look up at {e.target}"}
    if isinstance(e, ev.Done):
        return {"attempt": e.attempt, "claim_id": e.claim_id}
    if isinstance(e, ev.Receipt):
        return {"intent_event_id": e.intent_event_id, "attempt": e.attempts,
                "external_id": e.external_id, "receipt": f"{e.status.value}/{e.reason.value}",
                "next_state": e.key_status.value, "detail": shown_detail(e.detail)}
    if isinstance(e, ev.Alert):
        return {"outcome": f"alert {e.kind.value}", "detail": shown_detail(e.detail)}
    if isinstance(e, ev.AuditRecord):
        return {"outcome": f"audit {e.action.value}", "detail": f"by {e.who} ({e.role}, "
                f"{e.credential}) on {e.key}, command {e.command_id}"
                + (f": {e.detail}" if e.detail else "")}
    if isinstance(e, ev.DeadLetter):
        return {"outcome": "dead letter", "detail": f"{e.topic}[{e.partition}]@{e.offset}: "
                f"{e.reason}"}
    return {}


def _error(text: str) -> str:
    """A connector's error text is the target's answer and may echo payment details: only
    its length is shown."""
    return f"error ({len(text)} characters, not shown)" if text else ""
