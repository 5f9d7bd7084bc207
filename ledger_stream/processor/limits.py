"""What Kafka takes in one record, and what the processor does so that a decision never
makes a record it would refuse (a refused produce fails its batch on every retry: the
partition would stall for good). The step checks each decision against these before its
state changes (docs/processor.md, "Records Kafka would refuse")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_stream.domain import events as ev

# The largest record the processor's producer takes: librdkafka's message.max.bytes (its
# default, which the processor keeps; a topic's max.message.bytes is 1,048,588 unless set
# lower) counts a record's key, value and headers and its framing. RECORD_ROOM is what a
# record's key and value may take: the rest is kept for the framing (under 64 bytes) and
# the headers: an output's trace context (at most about 600 bytes, tracing.carried) or a
# changelog row's batch headers (its group name, two offsets and deadline basis).
RECORD_MAX = 1_000_000
RECORD_ROOM = RECORD_MAX - 2048
# What a decision on an input leaves free of that room: a deadline or a release the
# processor decides later (a lease run out, a retry, a reconcile timing out, an unfreeze)
# adds an entry or two to the key's row (about 100 bytes each) and has no record to
# dead-letter, so a row filled to RECORD_ROOM by an input would stall its key there.
GROWTH_ROOM = 4096
INPUT_ROOM = RECORD_ROOM - GROWTH_ROOM
MADE_HERE = (ev.Timer, ev.Release)  # the events the processor decides without an input


def oversized(outs: Sequence[tuple[Any, ...]], row: bytes | None, room: int) -> str:
    """Which record of a decision Kafka would refuse (what it is and its size), or "".
    ``outs``: its outputs (``step.Out``: topic, key, value, ...); ``room``: what a record's
    value may take beside its key. Lengths only: the bytes are
    the ones that will be produced."""
    if row is not None and len(row) > room:
        return (f"its key's state row would take {len(row):,} bytes, more than Kafka "
                f"takes in a record ({RECORD_MAX:,} with its key and headers)")
    for out in outs:
        if len(out[2]) > room:
            return (f"its {out[0]} record would take {len(out[2]):,} bytes, more than Kafka "
                    f"takes in a record ({RECORD_MAX:,} with its key and headers)")
    return ""


# A connector's error text past this many characters is cut to it, a marker saying how long
# it was (the row, the receipt and alerts copy it). It is a diagnostic for people; whole, a
# huge text (a target's HTML error page) could make the key's records larger than Kafka
# takes, and the outcome it comes with (the effect's fate) would be dead-lettered with it.
ERROR_TEXT_MAX = 4096
REPORTS = (ev.AttemptOutcome, ev.ReconcileResult)


def error_cut(event: ev.AttemptOutcome | ev.ReconcileResult
              ) -> ev.AttemptOutcome | ev.ReconcileResult:
    """``event`` with its error text cut to ERROR_TEXT_MAX characters and the marker."""
    error = f"{event.error[:ERROR_TEXT_MAX]}... [cut: {len(event.error):,} characters]"
    if isinstance(event, ev.AttemptOutcome):
        return ev.AttemptOutcome(event.event_id, event.key, event.attempt, event.claim_id,
                                 event.status, event.at_ms, event.external_id, error,
                                 event.target_deduplicates)
    return ev.ReconcileResult(event.event_id, event.key, event.attempt, event.claim_id,
                              event.status, event.target_deduplicates, event.at_ms,
                              event.external_id, error)
