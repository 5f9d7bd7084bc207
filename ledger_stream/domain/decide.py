"""The per-key decision table (docs/design.md, 'The decision table') as one pure function.

``decide(state, event, policy, now_ms) -> Decision(state, outputs)``: no I/O, no clock, no
randomness. ``now_ms`` is the processor's partition clock (broker timestamps, monotone per
partition), never a client's clock; every output id derives from the key, the intent event
id and the attempt number, so reprocessing an event after a crash yields byte-identical
outputs and correctness never depends on Kafka transactions. ``sent_ms`` (the time the
outputs leave, read by the runtime) only moves the key's deadline later (``sent_at_ms``):
it is in no output.

Guarantees, for one key:
- at most one Grant per attempt number, ever (a repeated claim with the same claim id gets
  the same Grant again);
- no Dispatch after a conflict, a rejected approval or on an expired key;
- every AttemptClaim gets exactly one answer naming its claim id (Grant, Held, Reconcile,
  Done);
- at most one Dispatch of a key carries a pre-grant (``policy.pregrant_lease_ms``: the
  reserving one), and while it runs only a fenced claim is granted, under its end;
- every Intent gets exactly one Receipt naming its event id;
- a report of an effect is never dropped: it settles a key still in flight, turns a failed
  key into a succeeded one (``late_effect``), or raises ``duplicate_effect``;
- an outcome nobody could establish never becomes a definite failure: it ends in
  ``needs_reconciliation`` with an alert;
- no key stays in flight in silence: a deadline (``due_ms``) reconciles a silent holder,
  alerts an unclaimed dispatch, hands a reconciliation without answer to an operator, and
  seals a terminal key after the replay window;
- a deadline that waits for an answer to the ledger's own output (a claim after a Dispatch,
  an outcome after a Grant, a result after a Reconcile) never expires before the output
  left, plus its allowance: a processor's lag is never taken for a silent connector;
- a reconcile result counts only for the attempt it names, while that attempt is being
  reconciled (a key reconciles each attempt at most once, so the attempt names the request);
  one for another attempt is recorded, except a found effect, which is never dropped.
"""

from __future__ import annotations

from ledger_stream.domain.approval import approval_problem
from ledger_stream.domain.containment import Hold, claim_again, release, withhold
from ledger_stream.domain.deadlines import deadline
from ledger_stream.domain.effects import effect_seen, watched_target
from ledger_stream.domain.events import (
    AlertKind,
    AttemptClaim,
    AttemptEvent,
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
    PoisonInput,
    Reason,
    Receipt,
    ReceiptStatus,
    Reconcile,
    ReconcileResult,
    ReconcileStatus,
    Release,
    Resolution,
    Timer,
)
from ledger_stream.domain.outputs import (
    alert_for,
    decision_mark,
    dispatch_for,
    receipt_for,
    state_receipt,
)
from ledger_stream.domain.policy import Policy, versions_compatible
from ledger_stream.domain.state import AttemptRecord, KeyState, Phase
from ledger_stream.domain.transitions import (
    Decision,
    after_lease,
    enter,
    expire_if_due,
    next_attempt,
    reconcile,
    to_operator,
)

DEFAULT_POLICY = Policy()
# A conflict's answer names no held argument, not even their hash: a caller probing a key
# with guesses would learn which one it holds (the alert, for operators, names both).
CONFLICT_DETAIL = "the key holds other arguments"


def decide(state: KeyState, event: InputEvent, policy: Policy, now_ms: int,
           hold: Hold | None = None, sent_ms: int = 0, appended_ms: int = 0) -> Decision:
    """Apply one input event to one key's state at partition time ``now_ms``. Pure.

    ``hold``: the freeze covering the key's (tenant, action), if any (containment.py): a
    decision that would dispatch holds the key instead.

    ``sent_ms``: when this decision's outputs leave the processor, by its own clock (0: not
    known). A Dispatch, Grant or Reconcile the key then waits on arms its deadline from no
    earlier than this (``KeyState.sent_at_ms``), yet never more than ``policy.lag_credit_ms``
    past ``now_ms``: a wall clock far ahead cannot hold off a reconciliation. It changes no
    output: a decision repeated after a crash, at another ``sent_ms``, yields the same bytes
    and a deadline no earlier than the first copy's.

    ``appended_ms``: the broker timestamp of the event's own record, at or before ``now_ms``
    (0: ``now_ms``; a later one counts as ``now_ms``). A claim is judged against the
    pre-grant's end by it (``_claim``): the partition clock is the latest time read on either
    input topic, and can pass that end on the intents topic before a claim appended within
    it is read. It is fixed in the log, so a replay decides the same."""
    if isinstance(event, PoisonInput):
        return _poison(state, event, now_ms)
    state = expire_if_due(state, now_ms, policy)
    decision = _decide(state, event, policy, now_ms, hold,
                       min(appended_ms, now_ms) if appended_ms > 0 else now_ms)
    if hold is not None:
        decision = withhold(state, decision, hold, now_ms)
    if sent_ms > 0:
        decision = _sent(decision, min(sent_ms, now_ms + policy.lag_credit_ms))
    return _answered_for(decision, event) if isinstance(event, Intent) else decision


# The output each in-flight phase waits on an answer to (deadlines.py counts from its time).
_AWAITED: dict[Phase, type[Dispatch | Grant | Reconcile]] = {
    Phase.RESERVED: Dispatch, Phase.DISPATCHED: Grant, Phase.RECONCILING: Reconcile}


def _sent(decision: Decision, sent_ms: int) -> Decision:
    """``decision`` with the key's wait counted from ``sent_ms`` when it sends the output
    its new phase waits on (for the key's current attempt)."""
    state = decision.state
    awaited = _AWAITED.get(state.phase)
    if awaited is None or state.sent_at_ms == sent_ms:
        return decision
    for out in decision.outputs:
        if isinstance(out, Dispatch | Grant | Reconcile) and isinstance(out, awaited) \
                and out.attempt == state.attempt:
            return Decision(state.changed(sent_at_ms=sent_ms), decision.outputs)
    return decision


def _answered_for(decision: Decision, intent: Intent) -> Decision:
    """The receipt answering ``intent`` names which kind of run asked."""
    origin, event_id = intent.origin._value_, intent.event_id  # _value_: see outputs.py
    return Decision(decision.state, tuple([
        o.with_origin(origin) if isinstance(o, Receipt) and o.intent_event_id == event_id
        else o
        for o in decision.outputs]))


def _decide(state: KeyState, event: Intent | AttemptEvent | Timer | Release, policy: Policy,
            now_ms: int, hold: Hold | None, appended_ms: int) -> Decision:
    if isinstance(event, Intent):
        return _intent(state, event, policy, now_ms, hold)
    if isinstance(event, Release):
        return release(state, event, now_ms)
    if isinstance(event, AttemptClaim):
        return _claim(state, event, now_ms, appended_ms)
    if isinstance(event, AttemptOutcome):
        return _outcome(state, event, policy, now_ms)
    if isinstance(event, ReconcileResult):
        return _reconcile_result(state, event, policy, now_ms)
    if isinstance(event, Timer):
        return deadline(state, policy, now_ms)
    return _operator(state, event, policy, now_ms)


# --- intents --------------------------------------------------------------------------


def _intent(state: KeyState, intent: Intent, policy: Policy, now: int,
            hold: Hold | None) -> Decision:
    if state.phase is Phase.EXPIRED:
        receipt = receipt_for(state, intent.event_id, now, status=ReceiptStatus.REJECTED,
                              reason=Reason.EXPIRED_KEY, detail="key expired")
        alert = alert_for(state.key, AlertKind.EXPIRED_KEY_REUSE, intent.event_id,
                       "intent for a key sealed after its replay window", now)
        return Decision(state, (receipt, alert))
    if state.phase is Phase.ABSENT:
        return _reserve(state, intent, policy, now, hold)
    # Conflicts first: other arguments are a conflict whatever the workflow version says.
    if intent.args_hash != state.args_hash:
        receipt = receipt_for(state, intent.event_id, now, status=ReceiptStatus.REJECTED,
                              reason=Reason.CONFLICT, args_hash=intent.args_hash,
                              detail=CONFLICT_DETAIL)
        alert = alert_for(state.key, AlertKind.CONFLICTING_ARGUMENTS, intent.event_id,
                       f"held {state.args_hash}, got {intent.args_hash} from "
                       f"{_asked_by(intent)}", now)
        return Decision(state, (receipt, alert))
    # A duplicate's approval was valid when the original reserved the key, so its expiry
    # is not judged again; a forged or mismatched one is still a signal.
    problem = approval_problem(intent, policy.approval_keys,
                               policy.requires_approval(intent.action), None)
    if problem is not None:
        return _approval_rejected(state, intent, problem, now)
    if state.phase.in_flight and not (
        intent.workflow.graph == state.graph
        and versions_compatible(state.version, intent.workflow.version)
    ):
        receipt = receipt_for(state, intent.event_id, now, status=ReceiptStatus.HELD,
                              reason=Reason.VERSION)
        alert = alert_for(state.key, AlertKind.VERSION_MISMATCH, intent.event_id,
                       f"in flight {state.graph}@{state.version}, "
                       f"intent {intent.workflow.graph}@{intent.workflow.version}", now)
        return Decision(state, (receipt, alert))
    reason = Reason.FROZEN if state.phase is Phase.HELD else Reason.NONE
    return Decision(state, (receipt_for(state, intent.event_id, now, reason=reason,
                                        detail=state.status_detail),))


def _asked_by(intent: Intent) -> str:
    """Which run asked: ``a fork of refund-agent@1.0, thread t-1, checkpoint 1f0…``."""
    w = intent.workflow
    where = f"a {intent.origin.value} run of {w.graph}@{w.version}"
    if w.thread_id:
        where += f", thread {w.thread_id}"
    if w.checkpoint_id:
        where += f", checkpoint {w.checkpoint_id}"
    return where


def _approval_rejected(state: KeyState, intent: Intent, problem: str, now: int) -> Decision:
    receipt = receipt_for(state, intent.event_id, now, status=ReceiptStatus.REJECTED,
                          reason=Reason.APPROVAL, args_hash=intent.args_hash, detail=problem)
    alert = alert_for(state.key, AlertKind.APPROVAL_MISMATCH, intent.event_id, problem, now)
    return Decision(state, (receipt, alert))


def _reserve(state: KeyState, intent: Intent, policy: Policy, now: int,
             hold: Hold | None) -> Decision:
    # A freeze in approval mode routes every new intent of its action to approval.
    required = policy.requires_approval(intent.action) or (hold is not None and hold.approval)
    problem = approval_problem(intent, policy.approval_keys, required, now)
    if problem is not None:
        return _approval_rejected(state, intent, problem, now)
    # The fields first, then the phase: two calls the compiled core makes natively (a
    # ``**changes`` passed through ``enter`` goes through Python's keyword matching).
    reserved = enter(state.changed(
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
        not_before_ms=now,
        reserved_at_ms=now,
        # Pre-granted (an exactly-once processor): to the connector that fences this
        # Dispatch's record, until then. A freeze withholds the Dispatch, and HELD drops it.
        pregrant_until_ms=now + policy.pregrant_lease_ms if policy.pregrant_lease_ms > 0
        else 0,
    ), Phase.RESERVED, now)
    return Decision(reserved, (state_receipt(reserved, now),
                               dispatch_for(reserved, now, pregranted=True)))


def _claim(state: KeyState, claim: AttemptClaim, now: int, appended: int) -> Decision:
    n, cid = claim.attempt, claim.claim_id
    # A fenced claim is its fencer's when its own record was appended before the pre-grant's
    # end (``appended``, its broker time), however far past that end the partition clock is
    # when the claim is read: its connector calls without waiting for this answer.
    under_pregrant = claim.fenced and appended < pregrant_end(state)
    if state.phase is Phase.HELD and n == state.attempt:
        if under_pregrant:
            # The fencer of a pre-grant that left before the freeze: it is calling (a grant
            # given before a freeze is not recalled), so the ledger records it as the holder.
            return _granted(state.changed(held_by="", status_detail=""), n, cid,
                            pregrant_end(state), now, fenced=True)
        # A dispatch that left before a freeze: its claimant waits for the unfreeze.
        return Decision(state, (claim_again(state, n, cid, now),))
    open_attempt = state.phase in (Phase.RESERVED, Phase.DISPATCHED) and n == state.attempt
    if not open_attempt:
        return Decision(state, (Done(state.key, n, cid, now),))
    if state.phase is Phase.RESERVED:
        if now < state.not_before_ms:
            return Decision(state, (Held(state.key, n, cid, state.not_before_ms, now),))
        if under_pregrant:
            # The pre-grant goes to the connector that fenced the Dispatch (it calls under
            # the Dispatch's lease, without waiting for this Grant).
            return _granted(state, n, cid, pregrant_end(state), now, fenced=True)
        end = pregrant_end(state)
        if appended < end:
            # A plain claimant waits until nobody can call under the pre-grant any more,
            # judged by its own record's time as a fenced claim is: read after the end (the
            # clock passed it on the intents topic), a fenced claim appended before the end
            # may still follow it in the attempts log.
            return Decision(state, (Held(state.key, n, cid, end, now),))
        return _granted(state, n, cid, now + claim.lease_ms, now)
    if cid == state.granted_claim_id:
        return Decision(state, (Grant(state.key, n, cid, state.lease_until_ms, now),))
    if now < state.lease_until_ms:
        return Decision(state, (Held(state.key, n, cid, state.lease_until_ms, now),))
    # The holder is presumed dead: find out what it did before anything is resent.
    return reconcile(state, now, cid, AttemptRecord(n, cid, "lease_expired", now),
                      "lease expired without an outcome")


def pregrant_end(state: KeyState) -> int:
    """The end of the pre-grant of a key RESERVED or HELD on attempt 1 (0: none): running
    (``pregrant_until_ms``), or ended with no fenced claim read and kept as a lease (by the
    pre-grant's timer or a freeze's hold: ``lease_until_ms``, which a key waiting for a
    grant holds for nothing else; 0 from the next attempt on, ``next_attempt``)."""
    return max(state.pregrant_until_ms, state.lease_until_ms)


def _granted(state: KeyState, n: int, cid: str, lease_until: int, now: int,
             fenced: bool = False) -> Decision:
    """Attempt ``n`` granted to claim ``cid`` until ``lease_until``. ``fenced``: under the
    pre-grant, to its fencer; the key keeps the pre-grant's end (its lease) to say so, as
    the fencer's deadline falls at that end (deadlines.py, ``FENCED``): nobody re-reads a
    fenced record to claim it after a crash."""
    granted = enter(state.changed(granted_claim_id=cid, lease_until_ms=lease_until),
                    Phase.DISPATCHED, now, AttemptRecord(n, cid, "granted", now))
    if fenced:
        granted = granted.changed(pregrant_until_ms=lease_until)
    return Decision(granted, (Grant(state.key, n, cid, lease_until, now),
                              state_receipt(granted, now)))


def _outcome(state: KeyState, outcome: AttemptOutcome, policy: Policy, now: int) -> Decision:
    n = outcome.attempt
    if state.phase is Phase.ABSENT:
        alert = alert_for(state.key, AlertKind.EFFECT_WITHOUT_INTENT, outcome.event_id,
                       f"attempt {n} reported {outcome.status.value} for an unknown key", now)
        return Decision(state, (alert,))
    record = AttemptRecord(n, outcome.claim_id, outcome.status.value, now, outcome.external_id)
    if outcome.status is OutcomeStatus.SUCCEEDED:
        return effect_seen(state, record, outcome.event_id, outcome.target_deduplicates,
                            by_lookup=False)
    if not state.phase.live:
        return Decision(state)  # a sealed key keeps only its marker
    is_holder_report = (
        n == state.attempt
        and outcome.claim_id == state.granted_claim_id
        and state.phase in (Phase.DISPATCHED, Phase.RECONCILING, Phase.NEEDS_OPERATOR)
    )
    if (not is_holder_report and outcome.status is OutcomeStatus.UNKNOWN
            and state.phase in (Phase.RESERVED, Phase.HELD) and n == state.attempt):
        # A call for the open attempt with no grant on record: at least once, a Grant whose
        # batch was abandoned (already on the topic) or a claim decided before its intent
        # and answered Done. The effect may exist: ask the target before any resend. Held
        # by a freeze too: its unfreeze would otherwise dispatch the attempt again (found
        # by a hostile review, 2026-12-05).
        return reconcile(state, now, outcome.claim_id, record,
                         f"outcome unknown from a claim without a grant: {outcome.error}")
    if not is_holder_report:
        return Decision(state.with_record(record))  # stale or not from the holder
    return _holder_report(state.with_record(record), outcome, policy, now)


def _holder_report(state: KeyState, outcome: AttemptOutcome, policy: Policy,
                   now: int) -> Decision:
    """A definite or unknown outcome from the granted holder of the current attempt (also
    accepted in RECONCILING and NEEDS_OPERATOR: it settles what they were asking)."""
    n, status = outcome.attempt, outcome.status
    if status is OutcomeStatus.UNKNOWN:
        if state.phase is not Phase.DISPATCHED:
            return Decision(state)  # already reconciling or with an operator
        return reconcile(state, now, outcome.claim_id, None,
                          f"outcome unknown: {outcome.error}")
    if state.phase is not Phase.DISPATCHED:
        # The holder's definite answer settles the question a reconciliation was asking.
        state = state.changed(unknown_attempts=max(0, state.unknown_attempts - 1))
    if status is OutcomeStatus.FAILED:
        failed = enter(state.changed(status_detail=outcome.error), Phase.FAILED, now)
        return Decision(failed, (state_receipt(failed, now, Reason.TARGET_REJECTED),))
    counted = status is OutcomeStatus.NOT_APPLIED
    what = "not applied" if counted else "not called"
    return next_attempt(state, now, now + policy.retry_backoff_ms,
                         f"attempt {n} {what}: {outcome.error}", policy, counted=counted)


def _reconcile_result(state: KeyState, result: ReconcileResult, policy: Policy,
                      now: int) -> Decision:
    n = result.attempt
    record = AttemptRecord(n, result.claim_id, f"reconcile:{result.status.value}", now,
                           result.external_id)
    if result.status is ReconcileStatus.FOUND:
        if state.phase is Phase.ABSENT:
            alert = alert_for(state.key, AlertKind.EFFECT_WITHOUT_INTENT, result.event_id,
                           "target holds an effect for an unknown key", now)
            return Decision(state, (alert,))
        found_at = watched_target(result.claim_id)
        if found_at is not None and state.target and found_at != state.target:
            # Another target's record uses this key: not the key's effect, which it must
            # never settle (the key's own effect would then never be made).
            alert = alert_for(state.key, AlertKind.EFFECT_WITHOUT_INTENT, result.event_id,
                              f"target {found_at} holds an effect under this key, whose "
                              f"effect is for target {state.target}", now)
            return Decision(state, (alert,))
        return effect_seen(state, record, result.event_id, result.target_deduplicates,
                            by_lookup=True)
    if not (state.phase is Phase.RECONCILING and n == state.attempt):
        return Decision(state.with_record(record) if state.phase.live else state)
    if result.status is ReconcileStatus.UNQUERYABLE:
        return to_operator(state, now, "target cannot be queried: " + result.error,
                           result.event_id, record)
    rules = policy.rules(state.action)
    if rules.retries_after_lookup(result.target_deduplicates):
        # The target fences duplicates by key, so resending with the same key is safe (or
        # the action is reversible and its policy accepts a duplicate a stale lookup makes).
        # A resend the target would not fence is the policy's doing: the detail names it.
        by_rule = "" if result.target_deduplicates else policy.cited(state.action)
        return next_attempt(state.with_record(record), now, after_lease(state, now, policy),
                             f"attempt {n} not found at the target{by_rule}", policy)
    why = ("not found, and the target does not deduplicate" if not result.target_deduplicates
           else "not found, and the action's policy retries nothing after a lookup")
    return to_operator(state, now, why + policy.cited(state.action), result.event_id, record)


def _operator(state: KeyState, resolution: OperatorResolution, policy: Policy,
              now: int) -> Decision:
    n = resolution.attempt
    if not (state.phase is Phase.NEEDS_OPERATOR and n == state.attempt):
        return Decision(state)
    who = f"operator:{resolution.operator}"
    record = AttemptRecord(n, who, f"operator:{resolution.resolution.value}", now,
                           resolution.external_id)
    # The receipt names the decision that took effect, so whoever sent a decision learns
    # whether it was theirs (operate/decisions.py reads it back with ``decision_named``).
    per = f"per {resolution.operator} {decision_mark(resolution.event_id)}"
    if resolution.resolution is Resolution.APPLIED:
        done = enter(state.changed(external_id=resolution.external_id, settled_by=who,
                                   status_detail=f"applied {per}"),
                     Phase.SUCCEEDED, now, record)
        return Decision(done, (state_receipt(done, now, Reason.OPERATOR),))
    if resolution.resolution is Resolution.FAILED:
        failed = enter(state.changed(status_detail=f"failed {per}"), Phase.FAILED, now, record)
        return Decision(failed, (state_receipt(failed, now, Reason.OPERATOR),))
    # The operator established that the attempt did not apply: it is no longer unknown.
    checked = state.with_record(record).changed(
        unknown_attempts=max(0, state.unknown_attempts - 1))
    return next_attempt(checked, now, after_lease(state, now, policy),
                         f"not applied {per}", policy, by_operator=True)


def _poison(state: KeyState, poison: PoisonInput, now: int) -> Decision:
    letter = DeadLetter(poison.topic, poison.partition, poison.offset, poison.reason,
                        now, poison.key, poison.value)
    source = f"{poison.topic}/{poison.partition}/{poison.offset}"
    alert = alert_for(state.key, AlertKind.POISON_INPUT, source, poison.reason, now)
    return Decision(state, (letter, alert))
