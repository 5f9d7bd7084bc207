"""The processor's outputs for one key: receipts, alerts and dispatches. Every id derives
from the key, the intent event id and the attempt number, so a replay yields the same bytes."""

from __future__ import annotations

import re

from ledger_stream.domain import ids
from ledger_stream.domain.events import (
    Alert,
    AlertKind,
    Dispatch,
    Reason,
    Receipt,
    ReceiptStatus,
)
from ledger_stream.domain.state import KeyState, Phase

# ``member._value_`` rather than ``member.value`` on the hot path: the same string, without the
# ``value`` property's descriptor (Python code in the enum module, even for compiled callers).

_PHASE_RECEIPT = {
    Phase.RESERVED: ReceiptStatus.ACCEPTED,
    Phase.DISPATCHED: ReceiptStatus.IN_PROGRESS,
    Phase.RECONCILING: ReceiptStatus.RECONCILING,
    Phase.NEEDS_OPERATOR: ReceiptStatus.NEEDS_RECONCILIATION,
    Phase.HELD: ReceiptStatus.HELD,
    Phase.SUCCEEDED: ReceiptStatus.SUCCEEDED,
    Phase.FAILED: ReceiptStatus.FAILED,
}


def key_status(state: KeyState) -> ReceiptStatus:
    """The key's state as a receipt status; a sealed key keeps its outcome."""
    if state.phase is Phase.EXPIRED and state.sealed_outcome:
        return _PHASE_RECEIPT[Phase(state.sealed_outcome)]
    return _PHASE_RECEIPT.get(state.phase, ReceiptStatus.REJECTED)


def receipt_for(state: KeyState, answering: str, at_ms: int, *, status: ReceiptStatus | None
                = None, reason: Reason = Reason.NONE, detail: str = "",
                args_hash: str | None = None) -> Receipt:
    """The key's receipt as an answer to event ``answering`` (an intent or a state change)."""
    status = status or key_status(state)
    return Receipt(
        receipt_id=ids.receipt_id(state.key, answering, state.attempt, status._value_),
        key=state.key,
        intent_event_id=answering,
        status=status,
        reason=reason,
        args_hash=state.args_hash if args_hash is None else args_hash,
        attempts=state.attempt,
        at_ms=at_ms,
        external_id=state.external_id,
        detail=detail,
        key_status=key_status(state),
        effect_intent_id=state.intent_event_id,
    )


def state_receipt(state: KeyState, at_ms: int, reason: Reason = Reason.NONE) -> Receipt:
    return receipt_for(state, state.intent_event_id, at_ms, reason=reason,
                       detail=state.status_detail)


def alert_for(key: str, kind: AlertKind, source_event_id: str, detail: str, at_ms: int) -> Alert:
    return Alert(ids.alert_id(key, kind._value_, source_event_id), key, kind, source_event_id,
                 detail, at_ms)


def dispatch_for(state: KeyState, at_ms: int, pregranted: bool = False) -> Dispatch:
    """The Dispatch of the key's current attempt. ``pregranted``: it carries the key's
    pre-grant (``lease_until_ms``); only the reserving Dispatch does. Every other one (a
    retry, the stall timer's copy, a release) carries none: two records carrying one
    pre-grant could be fenced by two connectors."""
    return Dispatch(
        dispatch_id=ids.dispatch_id(state.key, state.intent_event_id, state.attempt),
        key=state.key,
        attempt=state.attempt,
        intent_event_id=state.intent_event_id,
        tenant=state.tenant,
        action=state.action,
        target=state.target,
        args_json=state.args_json,
        args_hash=state.args_hash,
        payload_json=state.payload_json,
        not_before_ms=state.not_before_ms,
        at_ms=at_ms,
        lease_until_ms=state.pregrant_until_ms if pregranted else 0,
    )


_DECISION = re.compile(r"\[decision ([A-Za-z0-9._:-]{1,128})\]")


def decision_mark(decision_id: str) -> str:
    """How a receipt's detail names the operator decision that caused it."""
    return f"[decision {decision_id}]"


def decision_named(detail: str) -> str | None:
    """The decision id a receipt's detail names (the last mark: an operator's name that
    looks like one comes before it), or None."""
    found = _DECISION.findall(detail)
    return found[-1] if found else None
