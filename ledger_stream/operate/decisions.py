"""An operator's decision on a key waiting for one, guarded (CLI ``reconcile resolve`` and
the gateway's ``POST /v1/reconciliation/{key}``).

A decision names the state the operator looked at (the open attempt), carries a reason and
a decision id, and becomes an ``OperatorResolution`` on the attempts topic (its event id is
the decision id), so it is in the key's timeline and evidence with who, why and when.

- The key must wait for an operator at exactly that attempt, or the decision is refused:
  whatever the operator saw has changed since.
- The same decision again (same id, same contents) is a no-op: a script retrying after a
  timeout cannot decide twice. The same id with other contents is refused.
- The processor applies a decision only to the attempt it names while the key waits for an
  operator, so two decisions racing past these checks cannot both take effect.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import key_receipts, key_records
from ledger_stream.serde import AvroCodec, DecodeError


class DecisionRefused(Exception):
    """The decision does not fit the key's state or reuses an id (says which)."""


@dataclass(frozen=True)
class Decided:
    decision: ev.OperatorResolution
    replayed: bool  # True: this decision was already recorded; nothing was produced


def record_decision(settings: Settings, bootstrap: str, codec: AvroCodec, *, key: str,
                    attempt: int, resolution: ev.Resolution, operator: str, reason: str,
                    decision_id: str, external_id: str = "") -> Decided:
    if not reason.strip():
        raise DecisionRefused("a decision needs a reason")
    if resolution is ev.Resolution.APPLIED and not external_id:
        raise DecisionRefused("applied needs the target's id for the effect")
    wanted = ev.OperatorResolution(decision_id, key, attempt, resolution, operator,
                                   int(time.time() * 1000), external_id, reason)
    earlier = _recorded(settings, bootstrap, codec, key, decision_id)
    if earlier is not None:
        if _contents(earlier) != _contents(wanted):
            raise DecisionRefused(f"decision {decision_id} was recorded with other contents "
                                  f"({earlier.resolution.value} of attempt {earlier.attempt} "
                                  f"by {earlier.operator}): use a new decision id")
        return Decided(earlier, replayed=True)
    receipts = key_receipts(bootstrap, settings.topic("receipts"), key, codec)
    latest = receipts[-1] if receipts else None
    if latest is None or latest.key_status is not ev.ReceiptStatus.NEEDS_RECONCILIATION:
        state = latest.key_status.value if latest else "unknown to the ledger"
        raise DecisionRefused(f"{key} is not waiting for an operator (it is {state})")
    if latest.attempts != attempt:
        raise DecisionRefused(f"{key} waits at attempt {latest.attempts}, not {attempt}: "
                              "look at it again")
    producer = EventProducer(settings, bootstrap, codec, acks="all")
    try:
        producer.send("attempts", wanted)
        producer.flush()
    finally:
        producer.close()
    return Decided(wanted, replayed=False)


def _recorded(settings: Settings, bootstrap: str, codec: AvroCodec, key: str,
              decision_id: str) -> ev.OperatorResolution | None:
    for record in key_records(bootstrap, settings.topic("attempts"), key):
        try:
            event = codec.decode(record.value) if record.value is not None else None
        except DecodeError:
            continue
        if isinstance(event, ev.OperatorResolution) and event.event_id == decision_id:
            return event
    return None


def _contents(d: ev.OperatorResolution) -> tuple[object, ...]:
    return (d.key, d.attempt, d.resolution, d.operator, d.external_id, d.note)
