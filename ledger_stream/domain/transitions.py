"""Moves shared by several rows of the decision table: entering a phase, the next attempt,
reconciliation, handing a key to an operator, sealing after the replay window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger_stream.domain.events import AlertKind, OutputEvent, Reason, Reconcile
from ledger_stream.domain.outputs import alert_for, dispatch_for, state_receipt
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import AttemptRecord, KeyState, Phase


@dataclass(frozen=True, slots=True, init=False)
class Decision:
    state: KeyState
    outputs: tuple[OutputEvent, ...] = ()

    # Written out for the compiled core, as in events.py (tests/domain/test_written_out.py).
    def __init__(self, state: KeyState, outputs: tuple[OutputEvent, ...] = ()) -> None:
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "outputs", outputs)


def expire_if_due(state: KeyState, now_ms: int, policy: Policy) -> KeyState:
    if state.phase.terminal and \
            now_ms - state.terminal_at_ms > policy.replay_window_for(state.action):
        return state.sealed()
    return state


# The phases that wait out a pre-grant nobody was seen taking, as a lease (``enter``).
_WAITS_OUT_A_PREGRANT = (Phase.RECONCILING, Phase.NEEDS_OPERATOR)


def enter(state: KeyState, phase: Phase, now_ms: int, record: AttemptRecord | None = None,
           **changes: Any) -> KeyState:
    """``state`` in ``phase`` since ``now_ms`` (with ``record`` added to the history, and
    ``changes`` to its fields). The decision table sets other fields with
    ``state.changed(...)`` before it calls this, without ``changes``: then the compiled
    core makes native calls only (keywords passed through go through Python's matching)."""
    if changes:
        state = state.changed(**changes)
    if record is not None:
        state = state.with_record(record)
    # A pre-grant belongs to the RESERVED attempt it was given with: gone once the key
    # leaves RESERVED (a freeze's hold keeps a running one, and an ended one's end as a
    # lease: containment.withhold; a grant to its fencer keeps its end: decide._granted).
    # Its fencer calls without waiting for an answer, so a pre-grant nobody was seen taking
    # stays a lease when the key goes to a reconciliation or an operator: no new attempt
    # starts before its end plus the skew margin (``after_lease``).
    lease_until = state.pregrant_until_ms if phase in _WAITS_OUT_A_PREGRANT \
        and state.pregrant_until_ms > state.lease_until_ms else None
    return state.changed(phase=phase, phase_since_ms=now_ms,
                         terminal_at_ms=now_ms if phase.terminal else None,
                         lease_until_ms=lease_until,
                         pregrant_until_ms=None if phase is Phase.RESERVED else 0)


def next_attempt(state: KeyState, now: int, not_before_ms: int, detail: str,
                  policy: Policy, *, counted: bool = True, by_operator: bool = False,
                  ) -> Decision:
    """Move to attempt n+1 (same key), or stop when the counted attempts are used up: in
    FAILED when every attempt definitely did not apply, for an operator otherwise.

    ``by_operator``: an operator's decision caused this, and every receipt it yields says so
    (reason operator), so its sender can tell it took effect.

    A key that already waited for an operator and must wait again (an operator's or the
    holder's answer about attempt n left unknown outcomes and no attempts) is asked a new
    question: at attempt n+1, with no dispatch (counted as a lapse: nothing was called), so
    a decision sent about attempt n, by someone who never saw the new question, cannot
    answer it."""
    lapses = state.lapses + (0 if counted else 1)
    reason = Reason.OPERATOR if by_operator else Reason.NONE
    if counted and state.counted_attempts >= policy.max_attempts_for(state.action):
        used = f"{detail}; {state.counted_attempts} attempts used"
        cited = policy.cited(state.action)  # last: readers find the clauses from the end
        if state.unknown_attempts:
            why = f"{used}, {state.unknown_attempts} of them with an unknown outcome{cited}"
            asked = (state.changed(attempt=state.attempt + 1, lapses=state.lapses + 1)
                     if state.phase is Phase.NEEDS_OPERATOR else state)
            return to_operator(asked, now, why, f"max-attempts/{asked.attempt}",
                               reason=reason)
        failed = enter(state.changed(status_detail=used + cited), Phase.FAILED, now)
        return Decision(failed, (state_receipt(
            failed, now, Reason.OPERATOR if by_operator else Reason.MAX_ATTEMPTS),))
    nxt = enter(state.changed(attempt=state.attempt + 1, lapses=lapses, granted_claim_id="",
                              lease_until_ms=0, not_before_ms=not_before_ms,
                              status_detail=detail, pregrant_until_ms=0), Phase.RESERVED, now)
    outputs: tuple[OutputEvent, ...] = (state_receipt(nxt, now, reason), dispatch_for(nxt, now))
    if not counted and lapses == policy.lapse_alert_after:
        outputs += (alert_for(state.key, AlertKind.STALLED, f"lapse/{state.attempt}",
                           f"{lapses} grants in a row came too late to call: check "
                           "processor lag and connector clocks", now),)
    return Decision(nxt, outputs)


def to_operator(state: KeyState, now: int, why: str, source: str,
                 record: AttemptRecord | None = None, reason: Reason = Reason.NONE,
                 ) -> Decision:
    waiting = enter(state.changed(status_detail=why), Phase.NEEDS_OPERATOR, now, record)
    alert = alert_for(state.key, AlertKind.RECONCILIATION_REQUIRED, source, why, now)
    return Decision(waiting, (state_receipt(waiting, now, reason), alert))


def reconcile(state: KeyState, now: int, claim_id: str, record: AttemptRecord | None,
               why: str) -> Decision:
    """The outcome of the current attempt is unknown: ask the target, never resend."""
    reconciling = enter(state.changed(status_detail=why,
                                      unknown_attempts=state.unknown_attempts + 1),
                        Phase.RECONCILING, now, record)
    return Decision(reconciling, (
        Reconcile(state.key, state.attempt, claim_id, state.target, now),
        state_receipt(reconciling, now)))


def after_lease(state: KeyState, now: int, policy: Policy) -> int:
    """Earliest time a new attempt may start: a presumed-dead holder's lease has run out."""
    return max(now + policy.retry_backoff_ms, state.lease_until_ms + policy.clock_skew_ms)
