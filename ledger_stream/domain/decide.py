"""The per-key decision table (DESIGN §5) as one pure function.

``decide(state, event, policy) -> Decision(state, outputs)``: no I/O, no clock, no
randomness. Time comes from ``event.at_ms``; every output id derives from the key, the intent
event id and the attempt number, so reprocessing an event after a crash yields byte-identical
outputs and correctness never depends on Kafka transactions.

Guarantees, for one key:
- at most one Grant per attempt number, ever (a repeated claim with the same claim id gets
  the same Grant again);
- no Dispatch after a conflict, a rejected approval or on an expired key;
- every AttemptClaim gets exactly one answer naming its claim id (Grant, Held, Reconcile,
  Done);
- every Intent gets exactly one Receipt naming its event id;
- a stale attempt-scoped event changes nothing, except a stale ``succeeded``, which raises
  ``duplicate_effect``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ledger_stream.domain import ids
from ledger_stream.domain.approval import approval_problem
from ledger_stream.domain.events import (
    Alert,
    AlertKind,
    AttemptClaim,
    AttemptOutcome,
    DeadLetter,
    Dispatch,
    Done,
    Grant,
    Held,
    InputEvent,
    Intent,
    OperatorResolution,
    OutcomeStatus,
    OutputEvent,
    PoisonInput,
    Reason,
    Receipt,
    ReceiptStatus,
    Reconcile,
    ReconcileResult,
    ReconcileStatus,
    Resolution,
)
from ledger_stream.domain.policy import Policy, versions_compatible
from ledger_stream.domain.state import AttemptRecord, KeyState, Phase

_PHASE_RECEIPT = {
    Phase.RESERVED: ReceiptStatus.ACCEPTED,
    Phase.DISPATCHED: ReceiptStatus.IN_PROGRESS,
    Phase.RECONCILING: ReceiptStatus.RECONCILING,
    Phase.NEEDS_OPERATOR: ReceiptStatus.NEEDS_RECONCILIATION,
    Phase.SUCCEEDED: ReceiptStatus.SUCCEEDED,
    Phase.FAILED: ReceiptStatus.FAILED,
}

DEFAULT_POLICY = Policy()


@dataclass(frozen=True, slots=True)
class Decision:
    state: KeyState
    outputs: tuple[OutputEvent, ...] = ()


def decide(state: KeyState, event: InputEvent, policy: Policy = DEFAULT_POLICY) -> Decision:
    """Apply one input event to one key's state. Pure and deterministic."""
    if isinstance(event, PoisonInput):
        return _poison(state, event)
    state = _expire_if_due(state, event.at_ms, policy)
    if isinstance(event, Intent):
        return _intent(state, event, policy)
    if isinstance(event, AttemptClaim):
        return _claim(state, event)
    if isinstance(event, AttemptOutcome):
        return _outcome(state, event, policy)
    if isinstance(event, ReconcileResult):
        return _reconcile_result(state, event, policy)
    return _operator(state, event, policy)


def _expire_if_due(state: KeyState, now_ms: int, policy: Policy) -> KeyState:
    if state.phase.terminal and now_ms - state.terminal_at_ms > policy.replay_window_ms:
        return state.sealed()
    return state


# --- receipts, alerts and dispatches ------------------------------------------------------


def receipt_for(state: KeyState, answering: str, at_ms: int, *, status: ReceiptStatus | None
                = None, reason: Reason = Reason.NONE, detail: str = "",
                args_hash: str | None = None) -> Receipt:
    """The key's receipt as an answer to event ``answering`` (an intent or a state change)."""
    status = status or _PHASE_RECEIPT[state.phase]
    return Receipt(
        receipt_id=ids.receipt_id(state.key, answering, state.attempt, status.value),
        key=state.key,
        intent_event_id=answering,
        status=status,
        reason=reason,
        args_hash=state.args_hash if args_hash is None else args_hash,
        attempts=state.attempt,
        at_ms=at_ms,
        external_id=state.external_id,
        detail=detail,
        key_status=_PHASE_RECEIPT.get(state.phase, ReceiptStatus.REJECTED),
    )


def _state_receipt(state: KeyState, at_ms: int, reason: Reason = Reason.NONE) -> Receipt:
    return receipt_for(state, state.intent_event_id, at_ms, reason=reason,
                       detail=state.status_detail)


def _alert(key: str, kind: AlertKind, source_event_id: str, detail: str, at_ms: int) -> Alert:
    return Alert(ids.alert_id(key, kind.value, source_event_id), key, kind, source_event_id,
                 detail, at_ms)


def _dispatch(state: KeyState, at_ms: int) -> Dispatch:
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
    )


def _next_attempt(state: KeyState, at_ms: int, not_before_ms: int, detail: str,
                  policy: Policy) -> Decision:
    """Move to attempt n+1 (same key), or fail when the attempts are used up."""
    if state.attempt >= policy.max_attempts:
        failed = replace(state, phase=Phase.FAILED, terminal_at_ms=at_ms,
                         status_detail=f"{detail}; {state.attempt} attempts used")
        return Decision(failed, (_state_receipt(failed, at_ms, Reason.MAX_ATTEMPTS),))
    nxt = replace(state, phase=Phase.RESERVED, attempt=state.attempt + 1,
                  granted_claim_id="", lease_until_ms=0, not_before_ms=not_before_ms,
                  status_detail=detail)
    return Decision(nxt, (_state_receipt(nxt, at_ms), _dispatch(nxt, at_ms)))


def _after_lease(state: KeyState, at_ms: int, policy: Policy) -> int:
    """Earliest time a new attempt may start: a presumed-dead holder's lease has run out."""
    return max(at_ms + policy.retry_backoff_ms, state.lease_until_ms + policy.clock_skew_ms)


# --- intents ------------------------------------------------------------------------------


def _intent(state: KeyState, intent: Intent, policy: Policy) -> Decision:
    at = intent.at_ms
    if state.phase is Phase.EXPIRED:
        receipt = receipt_for(state, intent.event_id, at, status=ReceiptStatus.REJECTED,
                              reason=Reason.EXPIRED_KEY, detail="key expired")
        alert = _alert(state.key, AlertKind.EXPIRED_KEY_REUSE, intent.event_id,
                       "intent for a key sealed after its replay window", at)
        return Decision(state, (receipt, alert))
    if state.phase is Phase.ABSENT:
        return _reserve(state, intent, policy)
    if state.phase.in_flight and not (
        intent.workflow.graph == state.graph
        and versions_compatible(state.version, intent.workflow.version)
    ):
        receipt = receipt_for(state, intent.event_id, at, status=ReceiptStatus.HELD,
                              reason=Reason.VERSION)
        alert = _alert(state.key, AlertKind.VERSION_MISMATCH, intent.event_id,
                       f"in flight {state.graph}@{state.version}, "
                       f"intent {intent.workflow.graph}@{intent.workflow.version}", at)
        return Decision(state, (receipt, alert))
    if intent.args_hash != state.args_hash:
        receipt = receipt_for(state, intent.event_id, at, status=ReceiptStatus.REJECTED,
                              reason=Reason.CONFLICT, args_hash=intent.args_hash,
                              detail=f"key holds args {state.args_hash}")
        alert = _alert(state.key, AlertKind.CONFLICTING_ARGUMENTS, intent.event_id,
                       f"held {state.args_hash}, got {intent.args_hash}", at)
        return Decision(state, (receipt, alert))
    return Decision(state, (receipt_for(state, intent.event_id, at,
                                        detail=state.status_detail),))


def _reserve(state: KeyState, intent: Intent, policy: Policy) -> Decision:
    at = intent.at_ms
    problem = approval_problem(intent, policy.approval_secret,
                               policy.requires_approval(intent.action))
    if problem is not None:
        receipt = receipt_for(state, intent.event_id, at, status=ReceiptStatus.REJECTED,
                              reason=Reason.APPROVAL, args_hash=intent.args_hash,
                              detail=problem)
        alert = _alert(state.key, AlertKind.APPROVAL_MISMATCH, intent.event_id, problem, at)
        return Decision(state, (receipt, alert))
    reserved = replace(
        state,
        phase=Phase.RESERVED,
        intent_event_id=intent.event_id,
        tenant=intent.tenant,
        action=intent.action,
        target=intent.target,
        args_hash=intent.args_hash,
        args_json=intent.args_json,
        payload_json=intent.payload_json,
        graph=intent.workflow.graph,
        version=intent.workflow.version,
        attempt=1,
        not_before_ms=at,
        reserved_at_ms=at,
    )
    return Decision(reserved, (_state_receipt(reserved, at), _dispatch(reserved, at)))


# --- claims -------------------------------------------------------------------------------


def _claim(state: KeyState, claim: AttemptClaim) -> Decision:
    at, n, cid = claim.at_ms, claim.attempt, claim.claim_id
    open_attempt = state.phase in (Phase.RESERVED, Phase.DISPATCHED) and n == state.attempt
    if not open_attempt:
        return Decision(state, (Done(state.key, n, cid, at),))
    if state.phase is Phase.RESERVED:
        if at < state.not_before_ms:
            return Decision(state, (Held(state.key, n, cid, state.not_before_ms, at),))
        lease_until = at + claim.lease_ms
        granted = state.with_record(
            AttemptRecord(n, cid, "granted", at),
            phase=Phase.DISPATCHED, granted_claim_id=cid, lease_until_ms=lease_until,
        )
        return Decision(granted, (Grant(state.key, n, cid, lease_until, at),
                                  _state_receipt(granted, at)))
    if cid == state.granted_claim_id:
        return Decision(state, (Grant(state.key, n, cid, state.lease_until_ms, at),))
    if at < state.lease_until_ms:
        return Decision(state, (Held(state.key, n, cid, state.lease_until_ms, at),))
    # The holder is presumed dead: find out what it did before anything is resent.
    reconciling = state.with_record(
        AttemptRecord(n, cid, "lease_expired", at), phase=Phase.RECONCILING,
        status_detail="lease expired without an outcome",
    )
    return Decision(reconciling, (Reconcile(state.key, n, cid, state.target, at),
                                  _state_receipt(reconciling, at)))


# --- outcomes -----------------------------------------------------------------------------


def _outcome(state: KeyState, outcome: AttemptOutcome, policy: Policy) -> Decision:
    at, n = outcome.at_ms, outcome.attempt
    if state.phase is Phase.ABSENT:
        alert = _alert(state.key, AlertKind.EFFECT_WITHOUT_INTENT, outcome.event_id,
                       f"attempt {n} reported {outcome.status.value} for an unknown key", at)
        return Decision(state, (alert,))
    record = AttemptRecord(n, outcome.claim_id, outcome.status.value, at, outcome.external_id)
    if outcome.status is OutcomeStatus.SUCCEEDED:
        return _effect_seen(state, record, outcome.event_id)
    if not state.phase.live:
        return Decision(state)  # a sealed key keeps only its marker
    is_holder_report = (
        n == state.attempt
        and outcome.claim_id == state.granted_claim_id
        and state.phase in (Phase.DISPATCHED, Phase.RECONCILING, Phase.NEEDS_OPERATOR)
    )
    if not is_holder_report:
        return Decision(state.with_record(record))  # stale or not from the holder
    if outcome.status is OutcomeStatus.NOT_APPLIED:
        # The holder says it did not call: attempt n+1 may start after the backoff.
        return _next_attempt(state.with_record(record), at, at + policy.retry_backoff_ms,
                             f"attempt {n} not applied: {outcome.error}", policy)
    if outcome.status is OutcomeStatus.FAILED:
        failed = state.with_record(record, phase=Phase.FAILED, terminal_at_ms=at,
                                   status_detail=outcome.error)
        return Decision(failed, (_state_receipt(failed, at, Reason.TARGET_REJECTED),))
    if state.phase is not Phase.DISPATCHED:
        return Decision(state.with_record(record))  # already reconciling
    reconciling = state.with_record(record, phase=Phase.RECONCILING,
                                    status_detail=f"outcome unknown: {outcome.error}")
    return Decision(reconciling, (Reconcile(state.key, n, outcome.claim_id, state.target, at),
                                  _state_receipt(reconciling, at)))


def _effect_seen(state: KeyState, record: AttemptRecord, source_event_id: str) -> Decision:
    """A report that the target applied the effect: settles the key or is a duplicate."""
    at, ext = record.at_ms, record.external_id
    if state.phase is Phase.SUCCEEDED or state.phase is Phase.EXPIRED:
        if ext == state.external_id:
            return Decision(state.with_record(record) if state.phase.live else state)
        return _duplicate(state, record, source_event_id,
                          f"second effect {ext!r}, first {state.external_id!r}")
    current = record.attempt == state.attempt and state.phase in (
        Phase.RESERVED, Phase.DISPATCHED, Phase.RECONCILING, Phase.NEEDS_OPERATOR)
    if not current:
        return _duplicate(state, record, source_event_id,
                          f"attempt {record.attempt} applied while the key is "
                          f"{state.phase.value} at attempt {state.attempt}")
    done = state.with_record(record, phase=Phase.SUCCEEDED, external_id=ext,
                             terminal_at_ms=at, status_detail="")
    return Decision(done, (_state_receipt(done, at),))


def _duplicate(state: KeyState, record: AttemptRecord, source_event_id: str,
               detail: str) -> Decision:
    alert = _alert(state.key, AlertKind.DUPLICATE_EFFECT, source_event_id, detail,
                   record.at_ms)
    if not state.phase.live:
        return Decision(state, (alert,))
    counted = state.with_record(record, duplicate_effects=state.duplicate_effects + 1)
    return Decision(counted, (alert,))


# --- reconciliation -----------------------------------------------------------------------


def _reconcile_result(state: KeyState, result: ReconcileResult, policy: Policy) -> Decision:
    at, n = result.at_ms, result.attempt
    record = AttemptRecord(n, result.claim_id, f"reconcile:{result.status.value}", at,
                           result.external_id)
    if result.status is ReconcileStatus.FOUND:
        if state.phase is Phase.ABSENT:
            alert = _alert(state.key, AlertKind.EFFECT_WITHOUT_INTENT, result.event_id,
                           "target holds an effect for an unknown key", at)
            return Decision(state, (alert,))
        return _effect_seen(state, record, result.event_id)
    if not (state.phase is Phase.RECONCILING and n == state.attempt):
        return Decision(state.with_record(record) if state.phase.live else state)
    if result.status is ReconcileStatus.NOT_FOUND and result.target_deduplicates:
        # The target fences duplicates by key, so resending with the same key is safe.
        return _next_attempt(state.with_record(record), at, _after_lease(state, at, policy),
                             f"attempt {n} not found at the target", policy)
    why = ("target cannot be queried: " + result.error
           if result.status is ReconcileStatus.UNQUERYABLE
           else "not found, and the target does not deduplicate")
    waiting = state.with_record(record, phase=Phase.NEEDS_OPERATOR, status_detail=why)
    alert = _alert(state.key, AlertKind.RECONCILIATION_REQUIRED, result.event_id, why, at)
    return Decision(waiting, (_state_receipt(waiting, at), alert))


def _operator(state: KeyState, resolution: OperatorResolution, policy: Policy) -> Decision:
    at, n = resolution.at_ms, resolution.attempt
    if not (state.phase is Phase.NEEDS_OPERATOR and n == state.attempt):
        return Decision(state)
    record = AttemptRecord(n, f"operator:{resolution.operator}",
                           f"operator:{resolution.resolution.value}", at,
                           resolution.external_id)
    if resolution.resolution is Resolution.APPLIED:
        done = state.with_record(record, phase=Phase.SUCCEEDED,
                                 external_id=resolution.external_id, terminal_at_ms=at,
                                 status_detail=f"applied per {resolution.operator}")
        return Decision(done, (_state_receipt(done, at, Reason.OPERATOR),))
    if resolution.resolution is Resolution.FAILED:
        failed = state.with_record(record, phase=Phase.FAILED, terminal_at_ms=at,
                                   status_detail=f"failed per {resolution.operator}")
        return Decision(failed, (_state_receipt(failed, at, Reason.OPERATOR),))
    return _next_attempt(state.with_record(record), at, _after_lease(state, at, policy),
                         f"not applied per {resolution.operator}", policy)


def _poison(state: KeyState, poison: PoisonInput) -> Decision:
    letter = DeadLetter(poison.topic, poison.partition, poison.offset, poison.reason,
                        poison.at_ms, poison.key, poison.value)
    source = f"{poison.topic}/{poison.partition}/{poison.offset}"
    alert = _alert(state.key, AlertKind.POISON_INPUT, source, poison.reason, poison.at_ms)
    return Decision(state, (letter, alert))
