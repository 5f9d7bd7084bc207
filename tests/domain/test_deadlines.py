"""Deadlines: no key stays in flight in silence, and terminal keys are sealed on time.

A ``Timer`` is what the runtime decides when the partition clock passes a key's ``due_ms``;
a timer that comes before the deadline, or for a key that moved on, changes nothing.
"""

from __future__ import annotations

import pytest

from ledger_stream.domain import Policy, decide, due_ms
from ledger_stream.domain import events as ev
from ledger_stream.domain.deadlines import TIMER_CLAIM
from ledger_stream.domain.state import KeyState, Phase
from tests.domain.test_decide import of, run
from tests.factories import KEY, claim, intent, outcome

pytestmark = pytest.mark.timeout(30)

OS = ev.OutcomeStatus
POLICY = Policy(replay_window_ms=100_000, retry_backoff_ms=0, clock_skew_ms=1_000,
                stall_after_ms=60_000, reconcile_timeout_ms=120_000)


def fire(state: KeyState, now: int) -> tuple[KeyState, list[ev.OutputEvent]]:
    decision = decide(state, ev.Timer(state.key, now), POLICY, now)
    return decision.state, list(decision.outputs)


def granted() -> KeyState:
    state, _ = run([intent(at_ms=1_000), claim(1, "c1", 2_000, lease_ms=10_000)],
                   policy=POLICY)
    return state


def test_a_silent_holder_is_reconciled_after_its_lease_and_the_stall_margin():
    state = granted()
    due = due_ms(state, POLICY)
    assert due == 12_000 + 1_000 + 60_000
    assert fire(state, due - 1) == (state, [])
    reconciling, out = fire(state, due)
    assert reconciling.phase is Phase.RECONCILING
    assert of(out, ev.Reconcile) == [ev.Reconcile(KEY, 1, TIMER_CLAIM, "sandbox", due)]
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.RECONCILING


def test_a_reconciliation_with_no_answer_goes_to_an_operator_with_an_alert():
    reconciling, _ = fire(granted(), 73_000)
    due = due_ms(reconciling, POLICY)
    assert due == 73_000 + 120_000
    waiting, out = fire(reconciling, due)
    assert waiting.phase is Phase.NEEDS_OPERATOR
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.RECONCILIATION_REQUIRED]


def test_an_unclaimed_dispatch_raises_stalled_once_and_is_offered_again():
    state, (_, dispatch) = run([intent(at_ms=1_000)], policy=POLICY)
    due = due_ms(state, POLICY)
    assert due == 61_000
    stalled, out = fire(state, due)
    assert stalled.phase is Phase.RESERVED
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.STALLED]
    assert [d.dispatch_id for d in of(out, ev.Dispatch)] == [dispatch.dispatch_id]
    assert due_ms(stalled, POLICY) is None  # once per attempt
    # A claim still gets the grant: nothing was burnt.
    granted_, out2 = run([claim(1, "c1", due + 5)], stalled, POLICY)
    assert granted_.phase is Phase.DISPATCHED and of(out2, ev.Grant)


def test_a_terminal_key_is_sealed_when_its_window_ends_without_another_event():
    state, _ = run([intent(at_ms=1_000), claim(1, "c1", 2_000),
                    outcome(OS.SUCCEEDED, 1, "c1", 3_000, external_id="pay-1")], policy=POLICY)
    due = due_ms(state, POLICY)
    assert due == 3_000 + 100_000 + 1
    assert fire(state, due - 1)[0] == state
    sealed, out = fire(state, due)
    assert sealed.phase is Phase.EXPIRED and out == []
    assert (sealed.args_json, sealed.payload_json) == ("", "")
    assert due_ms(sealed, POLICY) is None


def test_a_sealed_key_keeps_its_outcome_in_the_receipt_of_a_late_intent():
    state, _ = run([intent(at_ms=1_000), claim(1, "c1", 2_000),
                    outcome(OS.SUCCEEDED, 1, "c1", 3_000, external_id="pay-1")], policy=POLICY)
    sealed, _ = fire(state, 200_000)
    _, out = run([intent(at_ms=300_000)], sealed, POLICY)
    (receipt,) = of(out, ev.Receipt)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.REJECTED,
                                                ev.Reason.EXPIRED_KEY)
    # The compacted receipts topic keeps this as the key's latest: it must still say what
    # happened to the key.
    assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED
    assert receipt.external_id == "pay-1"


def test_a_stale_timer_changes_nothing():
    state = granted()
    settled, _ = run([outcome(OS.SUCCEEDED, 1, "c1", 3_000, external_id="p")], state, POLICY)
    assert fire(settled, 73_000) == (settled, [])


@pytest.mark.parametrize("phase_events", [
    [],
    [outcome(OS.UNKNOWN, 1, "c1", 3_000)],
])
def test_every_in_flight_phase_but_the_operator_queue_has_a_deadline(phase_events):
    state, _ = run(phase_events, granted(), POLICY)
    assert state.phase.in_flight and due_ms(state, POLICY) is not None
