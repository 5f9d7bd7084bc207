"""Everything the ledger knows about one key, as one redacted JSON document for an incident
review: the raw events with topic, partition and offset (ordered by log offset within each
topic, never by a wall clock), the timeline, the receipts, the alerts, the operators'
decisions and the audit records (who decided or froze, with which credential).

Redaction: material arguments and payloads are replaced by their length (an intent's
``args_hash`` stays: it is how the ledger tells arguments apart, though it is an unsalted
SHA-256 that can be guessed for small arguments), approval signatures are dropped, a dead
letter's bytes become their length and SHA-256, and the error texts connectors report (a
target's answer may echo payment details) become their length. A receipt's or an alert's
detail is shown through ``detail.shown_detail``: a target's text quoted in it (records
written before connectors summarised their failures) becomes its length. Keys, ids,
hashes, statuses and the ledger's own details stay: they are what a review needs.

``observations`` lists, per intent that carried any, what its step read from outside (source,
model, trace, digest and size: never the content, which the ledger never receives) and
whether it differs from what the same thread read first for the key (``changed``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.domain.observations import observation_changes
from ledger_stream.history.detail import shown_detail
from ledger_stream.history.timeline import Located, timeline
from ledger_stream.serde.records import to_record

REDACTION = ("material arguments, payloads and connector error texts replaced by their "
             "length; a target's text quoted in a receipt's or alert's detail replaced by its "
             "length; approval signatures dropped; dead-letter bytes replaced by their length "
             "and SHA-256")


def _sha(data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def redacted(event: Any) -> dict[str, Any]:
    """The event as a JSON-able record without arguments, payloads or secrets."""
    record = to_record(event)
    for name in ("args_json", "payload_json", "error"):
        if record.get(name):
            record[name] = {"redacted": True, "length": len(record[name])}
    if isinstance(event, ev.Receipt | ev.Alert):
        record["detail"] = shown_detail(event.detail)
    approval = record.get("approval")
    if isinstance(approval, dict):
        record["approval"] = {**approval, "signature": {"redacted": True}}
    for name in ("key", "value"):
        if isinstance(event, ev.DeadLetter) and isinstance(record.get(name), bytes | str):
            raw = getattr(event, name) or b""
            record[name] = {"redacted": True, "length": len(raw), "sha256": _sha(raw)}
    return record


def _raw(located: Located) -> dict[str, Any]:
    entry: dict[str, Any] = {"topic": located.topic, "partition": located.partition,
                             "offset": located.offset, "timestamp_ms": located.timestamp_ms}
    if located.event is None:
        return {**entry, "type": None, "error": located.error}
    return {**entry, "type": type(located.event).__name__, "event": redacted(located.event)}


def _of(records: Iterable[Located], kind: type) -> list[dict[str, Any]]:
    return [{"topic": r.topic, "partition": r.partition, "offset": r.offset,
             **redacted(r.event)} for r in records if isinstance(r.event, kind)]


def observations(records: list[Located]) -> list[dict[str, Any]]:
    """Each intent's observations in the ledger's order, with the changes flagged."""
    intents = [r.event for r in sorted(records, key=lambda r: (r.timestamp_ms, r.offset))
               if r.role == "intents" and isinstance(r.event, ev.Intent)]
    changes = observation_changes(intents)
    return [{"intent_event_id": i.event_id, "thread": i.workflow.thread_id,
             "origin": i.origin.value, "checkpoint": i.workflow.checkpoint_id,
             "observed": [to_record(o) for o in i.observations],
             "changed": [c.describe() for c in changes.get(i.event_id, ())]}
            for i in intents if i.observations]


def evidence(key: str, records: list[Located], generated_at_ms: int) -> dict[str, Any]:
    """The evidence document of ``key`` from its records (``history.read_key``)."""
    ordered = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    topics: dict[str, dict[str, Any]] = {}
    for r in ordered:
        topic = topics.setdefault(r.role, {"topic": r.topic, "partition": r.partition,
                                           "records": []})
        topic["records"].append(_raw(r))
    latest = next((r.event for r in reversed(ordered) if isinstance(r.event, ev.Receipt)),
                  None)
    return {
        "key": key,
        "generated_at_ms": generated_at_ms,
        "state": latest.key_status.value if latest is not None else None,
        "redaction": REDACTION,
        "topics": topics,
        "timeline": [row.as_dict() for row in timeline(records)],
        "receipts": _of(ordered, ev.Receipt),
        "alerts": _of(ordered, ev.Alert),
        "operator_actions": _of(ordered, ev.OperatorResolution),
        "audit": _of(ordered, ev.AuditRecord),
        "observations": observations(ordered),
        "undecodable": sum(1 for r in ordered if r.event is None),
    }
