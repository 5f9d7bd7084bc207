"""The decision table (docs/design.md), row by row, on the pure core."""

from __future__ import annotations

import pytest

from ledger_lab.harness.approvers import seeded_approver, trusted
from ledger_stream.domain import Policy, absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import sign_approval
from ledger_stream.domain.state import KeyState, Phase
from tests.domain.decisions import POLICY, of, run
from tests.factories import KEY, claim, intent, now_of, outcome, reconciled, resolution

pytestmark = pytest.mark.timeout(30)

OS, RS, RES = ev.OutcomeStatus, ev.ReconcileStatus, ev.Resolution
# The approver the policies trust, and a forger's key under the same key id.
APPROVER = seeded_approver("approver-1", "k")
FORGER = seeded_approver("approver-1", "wrong")
KEYS = trusted(APPROVER)
def granted() -> tuple[KeyState, list[ev.OutputEvent]]:
    return run([intent(), claim()])


# --- intents ------------------------------------------------------------------------------


def test_first_intent_reserves_and_dispatches_attempt_1():
    first = intent()
    state, out = run([first])
    assert state.phase is Phase.RESERVED and state.attempt == 1
    (receipt,) = of(out, ev.Receipt)
    assert (receipt.status, receipt.intent_event_id) == (ev.ReceiptStatus.ACCEPTED,
                                                         first.event_id)
    (dispatch,) = of(out, ev.Dispatch)
    assert (dispatch.attempt, dispatch.args_hash) == (1, first.args_hash)


def test_identical_duplicate_gets_the_original_receipt_and_no_dispatch():
    state, _ = run([intent(), claim(), outcome(OS.SUCCEEDED, external_id="pay-1")])
    dup = intent()
    state2, out = run([dup], state)
    assert state2 == state
    (receipt,) = out
    assert receipt.status is ev.ReceiptStatus.SUCCEEDED
    assert (receipt.external_id, receipt.intent_event_id) == ("pay-1", dup.event_id)


def test_same_key_different_arguments_is_rejected_and_alerted_without_dispatch():
    state, _ = run([intent()])
    other = intent(args={"amount": 999, "to": "cust-1"})
    state2, out = run([other], state)
    assert state2 == state
    (receipt,) = of(out, ev.Receipt)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.REJECTED, ev.Reason.CONFLICT)
    assert receipt.args_hash == other.args_hash
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.CONFLICTING_ARGUMENTS]
    assert not of(out, ev.Dispatch)


def test_numbers_are_normalised_so_10_and_10_0_are_the_same_arguments():
    state, _ = run([intent(args={"amount": 10})])
    _, out = run([intent(args={"amount": 10.0})], state)
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.ACCEPTED


@pytest.mark.parametrize("problem", ["missing", "forged", "payload", "expired", "revision"])
def test_bad_approval_is_rejected_and_alerted(problem):
    policy = Policy(approval_required_actions=frozenset({"refund"}), approval_keys=KEYS)
    base = intent(policy_revision="p1")
    approval = {
        "missing": None,
        "forged": sign_approval(FORGER, KEY, "a1", base.args_hash, "p1", 10_000),
        "payload": sign_approval(APPROVER, KEY, "a1", "0" * 64, "p1", 10_000),
        "expired": sign_approval(APPROVER, KEY, "a1", base.args_hash, "p1", 500),
        "revision": sign_approval(APPROVER, KEY, "a1", base.args_hash, "p0", 10_000),
    }[problem]
    state, out = run([intent(approval=approval, policy_revision="p1")], policy=policy)
    assert state.phase is Phase.ABSENT
    (receipt,) = of(out, ev.Receipt)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.REJECTED, ev.Reason.APPROVAL)
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.APPROVAL_MISMATCH]
    assert not of(out, ev.Dispatch)


def test_valid_approval_reserves():
    policy = Policy(approval_required_actions=frozenset({"refund"}), approval_keys=KEYS)
    base = intent()
    approval = sign_approval(APPROVER, KEY, "a1", base.args_hash, "", 10_000)
    state, out = run([intent(approval=approval)], policy=policy)
    assert state.phase is Phase.RESERVED and of(out, ev.Dispatch)


def test_incompatible_workflow_version_is_held_while_in_flight():
    state, _ = run([intent()])
    v2 = intent(workflow=ev.Workflow("refund-agent", "2.0", "thread-1", "refund_v2"))
    state2, out = run([v2], state)
    assert state2 == state
    (receipt,) = of(out, ev.Receipt)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.HELD, ev.Reason.VERSION)
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.VERSION_MISMATCH]


def test_terminal_key_expires_after_the_replay_window_and_is_never_new_work():
    state, _ = run([intent(), claim(), outcome(OS.SUCCEEDED, external_id="pay-1", at_ms=3_000)])
    inside, out_inside = run([intent(at_ms=3_000 + POLICY.replay_window_ms)], state)
    assert of(out_inside, ev.Receipt)[0].status is ev.ReceiptStatus.SUCCEEDED
    late = intent(at_ms=3_001 + POLICY.replay_window_ms)
    sealed, out = run([late], inside)
    assert sealed.phase is Phase.EXPIRED
    assert sealed.args_json == "" and sealed.external_id == "pay-1"
    (receipt,) = of(out, ev.Receipt)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.REJECTED,
                                                ev.Reason.EXPIRED_KEY)
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.EXPIRED_KEY_REUSE]
    assert not of(out, ev.Dispatch)


# --- claims -------------------------------------------------------------------------------


def test_claim_for_the_open_attempt_is_granted_with_a_lease():
    state, out = granted()
    assert state.phase is Phase.DISPATCHED
    (grant,) = of(out, ev.Grant)
    assert (grant.attempt, grant.claim_id, grant.lease_until_ms) == (1, "c1", 12_000)


def test_the_same_claim_again_gets_the_same_grant():
    state, out = granted()
    state2, out2 = run([claim()], state)
    assert state2 == state
    assert out2 == [ev.Grant(KEY, 1, "c1", 12_000, 2_000)]


def test_another_claim_within_the_lease_is_held():
    state, _ = granted()
    _, out = run([claim(claim_id="c2", at_ms=5_000)], state)
    assert out == [ev.Held(KEY, 1, "c2", 12_000, 5_000)]


def test_another_claim_after_the_lease_reconciles_never_grants():
    state, _ = granted()
    state2, out = run([claim(claim_id="c2", at_ms=12_000)], state)
    assert state2.phase is Phase.RECONCILING
    assert of(out, ev.Reconcile) == [ev.Reconcile(KEY, 1, "c2", "sandbox", 12_000)]
    assert not of(out, ev.Grant)


@pytest.mark.parametrize("attempt", [2, 0])
def test_claim_for_an_attempt_that_is_not_open_gets_done(attempt):
    state, _ = granted()
    _, out = run([claim(attempt=attempt, claim_id="c9")], state)
    assert out == [ev.Done(KEY, attempt, "c9", 2_000)]


def test_claim_before_the_backoff_is_held_until_not_before():
    state, _ = run([intent(), claim(), outcome(OS.NOT_APPLIED, at_ms=3_000)])
    assert state.attempt == 2 and state.not_before_ms == 3_500
    _, out = run([claim(attempt=2, claim_id="c2", at_ms=3_100)], state)
    assert out == [ev.Held(KEY, 2, "c2", 3_500, 3_100)]


# --- outcomes -----------------------------------------------------------------------------


def test_success_settles_the_key_with_the_external_id():
    state, _ = granted()
    state2, out = run([outcome(OS.SUCCEEDED, external_id="pay-1")], state)
    assert (state2.phase, state2.external_id) == (Phase.SUCCEEDED, "pay-1")
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.SUCCEEDED


def test_second_success_with_another_external_id_is_a_duplicate_effect():
    state, _ = run([intent(), claim(), outcome(OS.SUCCEEDED, external_id="pay-1")])
    state2, out = run([outcome(OS.SUCCEEDED, external_id="pay-2")], state)
    assert state2.external_id == "pay-1" and state2.duplicate_effects == 1
    assert [a.kind for a in out] == [ev.AlertKind.DUPLICATE_EFFECT]


def test_same_success_reported_twice_is_not_an_alert():
    state, _ = run([intent(), claim(), outcome(OS.SUCCEEDED, external_id="pay-1")])
    _, out = run([outcome(OS.SUCCEEDED, external_id="pay-1")], state)
    assert out == []


def test_outcome_for_an_unknown_key_is_an_effect_without_intent():
    state, out = run([outcome(OS.SUCCEEDED)])
    assert state.phase is Phase.ABSENT
    assert [a.kind for a in out] == [ev.AlertKind.EFFECT_WITHOUT_INTENT]


def test_retryable_failure_dispatches_the_next_attempt_with_the_same_key_after_backoff():
    state, _ = granted()
    state2, out = run([outcome(OS.NOT_APPLIED, at_ms=3_000)], state)
    assert (state2.phase, state2.attempt) == (Phase.RESERVED, 2)
    (dispatch,) = of(out, ev.Dispatch)
    assert (dispatch.key, dispatch.attempt, dispatch.not_before_ms) == (KEY, 2, 3_500)


def test_retryable_failures_stop_at_max_attempts():
    events: list[ev.InputEvent] = [intent()]
    for n in (1, 2, 3):
        events += [claim(attempt=n, claim_id=f"c{n}", at_ms=n * 10_000),
                   outcome(OS.NOT_APPLIED, attempt=n, claim_id=f"c{n}", at_ms=n * 10_000 + 1)]
    state, out = run(events)
    assert state.phase is Phase.FAILED
    assert of(out, ev.Receipt)[-1].reason is ev.Reason.MAX_ATTEMPTS
    assert len(of(out, ev.Dispatch)) == 3


def test_permanent_failure_fails_the_key():
    state, _ = granted()
    state2, out = run([outcome(OS.FAILED)], state)
    assert state2.phase is Phase.FAILED
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.FAILED
    assert not of(out, ev.Dispatch)


def test_unknown_outcome_reconciles_before_anything_is_resent():
    state, _ = granted()
    state2, out = run([outcome(OS.UNKNOWN)], state)
    assert state2.phase is Phase.RECONCILING
    assert of(out, ev.Reconcile) and not of(out, ev.Dispatch)


def test_failure_from_a_claim_that_was_not_granted_changes_nothing():
    state, _ = granted()
    state2, out = run([outcome(OS.NOT_APPLIED, claim_id="intruder")], state)
    assert (state2.phase, state2.attempt) == (Phase.DISPATCHED, 1) and out == []


def test_an_unknown_outcome_from_a_claim_never_granted_here_reconciles_never_grants_again():
    # At least once: c1's Grant went out in a batch that was then abandoned, and the retried
    # poll decided c1 before the intent (Done). The key is back at reserved with no grant,
    # and the holder of that lost Grant reports UNKNOWN: the effect may exist.
    state, out = run([claim(at_ms=900), intent(at_ms=1_000),
                      outcome(OS.UNKNOWN, claim_id="c1", at_ms=3_000)])
    assert state.phase is Phase.RECONCILING and len(of(out, ev.Reconcile)) == 1
    state, out = run([claim(claim_id="c2", at_ms=4_000)], state)
    assert not of(out, ev.Grant)  # a second connector never gets to call


def test_a_definite_failure_from_a_claim_never_granted_is_only_recorded():
    state, _ = run([intent()])
    state2, out = run([outcome(OS.NOT_APPLIED, claim_id="c9")], state)
    assert (state2.phase, state2.attempt) == (Phase.RESERVED, 1) and out == []


# --- reconciliation -----------------------------------------------------------------------


def reconciling() -> KeyState:
    state, _ = run([intent(), claim(), outcome(OS.UNKNOWN)])
    return state


def test_found_settles_the_key():
    state, out = run([reconciled(RS.FOUND, external_id="pay-1")], reconciling())
    assert (state.phase, state.external_id) == (Phase.SUCCEEDED, "pay-1")


def test_not_found_at_a_deduplicating_target_resends_with_the_same_key_after_the_lease():
    state, out = run([reconciled(RS.NOT_FOUND, dedup=True, at_ms=4_000)], reconciling())
    assert (state.phase, state.attempt) == (Phase.RESERVED, 2)
    (dispatch,) = of(out, ev.Dispatch)
    assert dispatch.key == KEY
    assert dispatch.not_before_ms == 12_000 + POLICY.clock_skew_ms


@pytest.mark.parametrize("result", [
    reconciled(RS.NOT_FOUND, dedup=False), reconciled(RS.UNQUERYABLE, dedup=False)])
def test_not_found_without_dedup_or_unqueryable_needs_an_operator(result):
    state, out = run([result], reconciling())
    assert state.phase is Phase.NEEDS_OPERATOR
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.NEEDS_RECONCILIATION
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.RECONCILIATION_REQUIRED]
    assert not of(out, ev.Dispatch)


@pytest.mark.parametrize("stale", [
    reconciled(RS.NOT_FOUND, 1, "c1", 30_000, dedup=True),
    reconciled(RS.NOT_FOUND, 1, "c1", 30_000, dedup=False),
    reconciled(RS.UNQUERYABLE, 1, "c1", 30_000, dedup=False)])
def test_a_result_for_an_earlier_attempt_does_not_answer_the_current_reconciliation(stale):
    """Attempt 1 was reconciled and found absent (the target deduplicates): attempt 2 went
    out, and its outcome is unknown too. A second answer to attempt 1's Reconcile (another
    connector, a replay) arrives while attempt 2 is reconciled: it is recorded, nothing
    more, and attempt 2's own result still decides."""
    state, _ = run([reconciled(RS.NOT_FOUND, 1, "c1", 20_000, dedup=True),
                    claim(2, "c2", 21_000), outcome(OS.UNKNOWN, 2, "c2", 22_000)],
                   reconciling())
    assert (state.phase, state.attempt) == (Phase.RECONCILING, 2)
    after, out = run([stale], state)
    assert out == []
    assert (after.phase, after.attempt, after.unknown_attempts) == (
        Phase.RECONCILING, 2, state.unknown_attempts)
    assert after.history[-1].what == f"reconcile:{stale.status.value}"
    settled, _ = run([reconciled(RS.FOUND, 2, "c2", 31_000, external_id="pay-2")], after)
    assert (settled.phase, settled.external_id) == (Phase.SUCCEEDED, "pay-2")


def test_a_decision_about_an_attempt_cannot_answer_the_question_asked_after_it():
    """Attempts used up, two of three unknown: an operator says attempt 3 did not apply, so
    the key must be asked about again. A second decision sent about attempt 3 (racing the
    first, its sender never saw the new question) is not taken as the answer; one about the
    new question is."""
    from dataclasses import replace

    exhausted = replace(needs_operator(), attempt=3, unknown_attempts=2)
    first = resolution(RES.NOT_APPLIED, attempt=3)
    state, out = run([first], exhausted)
    assert (state.phase, state.attempt, state.unknown_attempts) == (
        Phase.NEEDS_OPERATOR, 4, 1)
    assert not of(out, ev.Dispatch)  # asked again, never resent past max_attempts
    (asked,) = of(out, ev.Receipt)
    assert (asked.attempts, asked.reason) == (4, ev.Reason.OPERATOR)
    racing = resolution(RES.APPLIED, attempt=3, external_id="pay-9")
    assert run([racing], state) == (state, [])
    state, _ = run([resolution(RES.FAILED, attempt=4)], state)
    assert state.phase is Phase.FAILED


def _exhausted(unknown: int) -> KeyState:
    """Waiting for an operator at attempt 3 of 3, ``unknown`` of them unknown."""
    from dataclasses import replace

    return replace(needs_operator(), attempt=3, unknown_attempts=unknown)


def test_every_answer_to_an_operators_decision_names_it_even_when_it_fails_the_key():
    from ledger_stream.domain.outputs import decision_named

    decision = resolution(RES.NOT_APPLIED, attempt=3)
    state, out = run([decision], _exhausted(unknown=1))  # nothing unknown left: failed
    (receipt,) = of(out, ev.Receipt)
    assert state.phase is Phase.FAILED and receipt.reason is ev.Reason.OPERATOR
    assert decision_named(receipt.detail) == decision.event_id


def test_the_holders_late_answer_also_asks_a_new_question():
    """Asked at attempt 3 with two unknown, the holder of attempt 3 says "not applied": one
    unknown is left and the operator is asked again, at attempt 4. A decision about attempt
    3 sent before that cannot settle attempt 2's outcome nobody established."""
    from dataclasses import replace

    asked = replace(_exhausted(unknown=2), granted_claim_id="c3")
    state, _ = run([outcome(OS.NOT_APPLIED, attempt=3, claim_id="c3")], asked)
    assert (state.phase, state.attempt, state.unknown_attempts) == (
        Phase.NEEDS_OPERATOR, 4, 1)
    assert state.counted_attempts == 3  # a question, not an attempt: nothing was called
    assert run([resolution(RES.NOT_APPLIED, attempt=3)], state) == (state, [])


def test_a_late_success_of_the_last_granted_attempt_is_not_a_duplicate_after_a_new_question():
    from dataclasses import replace

    asked = replace(_exhausted(unknown=2), granted_claim_id="c3")
    state, _ = run([resolution(RES.NOT_APPLIED, attempt=3)], asked)
    assert state.attempt == 4
    late, out = run([outcome(OS.SUCCEEDED, attempt=3, claim_id="c3", external_id="ext-3")],
                    state)
    assert late.phase is Phase.SUCCEEDED and not of(out, ev.Alert)
    settled, _ = run([resolution(RES.APPLIED, attempt=4, external_id="ext-3")], state)
    again, out = run([outcome(OS.SUCCEEDED, attempt=3, claim_id="c3", external_id="ext-3")],
                     settled)
    assert not of(out, ev.Alert) and again.duplicate_effects == 0


def test_a_decision_under_a_freeze_keeps_the_receipt_naming_it():
    from ledger_stream.domain.containment import Freeze, Hold
    from ledger_stream.domain.outputs import decision_named

    freeze = Freeze("", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f1", 1)
    decision = resolution(RES.NOT_APPLIED)
    for room in (True, False):
        out = decide(needs_operator(), decision, POLICY, now_of(decision),
                     Hold(freeze, room=room)).outputs
        named = [r for r in of(out, ev.Receipt) if r.reason is ev.Reason.OPERATOR]
        assert [decision_named(r.detail) for r in named] == [decision.event_id], out
        assert not of(out, ev.Dispatch)


def test_the_receipt_of_an_operators_decision_names_it():
    from ledger_stream.domain.outputs import decision_named

    for kind in RES:
        decision = resolution(kind, external_id="pay-9")
        _, out = run([decision], needs_operator())
        (receipt,) = of(out, ev.Receipt)
        assert decision_named(receipt.detail) == decision.event_id
        assert receipt.reason is ev.Reason.OPERATOR  # only these name a decision


def needs_operator() -> KeyState:
    state, _ = run([reconciled(RS.UNQUERYABLE, dedup=False)], reconciling())
    return state


def test_operator_applied_settles_the_key():
    state, _ = run([resolution(RES.APPLIED, external_id="pay-9")], needs_operator())
    assert (state.phase, state.external_id) == (Phase.SUCCEEDED, "pay-9")


def test_operator_failed_fails_the_key():
    state, _ = run([resolution(RES.FAILED)], needs_operator())
    assert state.phase is Phase.FAILED


def test_operator_not_applied_redispatches_only_after_the_lease():
    state, out = run([resolution(RES.NOT_APPLIED, at_ms=5_000)], needs_operator())
    assert (state.phase, state.attempt) == (Phase.RESERVED, 2)
    assert of(out, ev.Dispatch)[0].not_before_ms >= 12_000 + POLICY.clock_skew_ms


def test_operator_resolution_for_a_key_not_waiting_changes_nothing():
    state, _ = granted()
    state2, out = run([resolution(RES.APPLIED, external_id="x")], state)
    assert state2 == state and out == []


def test_poison_goes_to_the_dlq_with_an_alert_and_no_state_change():
    state, _ = granted()
    poison = ev.PoisonInput("ledger.intents", 0, 7, "undecodable", 9_000, b"k", b"\x00")
    state2, out = run([poison], state)
    assert state2 == state
    assert [type(o) for o in out] == [ev.DeadLetter, ev.Alert]
    assert out[1].kind is ev.AlertKind.POISON_INPUT


def test_outputs_are_deterministic():
    events = [intent(), claim(), outcome(OS.UNKNOWN), reconciled(RS.NOT_FOUND, at_ms=20_000)]
    assert run(events) == run(events)


# --- the review's defects (time, approvals, attempts, ordering of checks) -----------------


def test_approval_expiry_is_judged_by_the_partition_clock_not_the_intents_stamp():
    policy = Policy(approval_required_actions=frozenset({"refund"}), approval_keys=KEYS)
    base = intent()
    approval = sign_approval(APPROVER, KEY, "a1", base.args_hash, "", 10_000)
    backdated = intent(approval=approval, at_ms=1_000)  # claims to be early
    decision = decide(absent(KEY), backdated, policy, 20_000)  # the broker says otherwise
    assert decision.state.phase is Phase.ABSENT
    assert of(decision.outputs, ev.Receipt)[0].reason is ev.Reason.APPROVAL


def test_an_intent_stamped_far_ahead_does_not_seal_the_key():
    state, _ = run([intent(), claim(), outcome(OS.SUCCEEDED, external_id="pay-1")])
    ahead = intent(at_ms=10**13)  # its own stamp is years ahead
    decision = decide(state, ahead, POLICY, 4_000)
    assert decision.state.phase is Phase.SUCCEEDED
    assert of(decision.outputs, ev.Receipt)[0].status is ev.ReceiptStatus.SUCCEEDED


def test_leases_run_on_the_partition_clock():
    decision = decide(run([intent()])[0], claim(at_ms=999_999, lease_ms=10_000), POLICY, 2_000)
    assert of(decision.outputs, ev.Grant)[0].lease_until_ms == 12_000


def test_a_conflict_with_another_workflow_version_is_a_conflict_not_a_hold():
    state, _ = run([intent()])
    other = intent(args={"amount": 999, "to": "cust-1"},
                   workflow=ev.Workflow("refund-agent", "2.0", "thread-1", "refund_v2"))
    _, out = run([other], state)
    (receipt,) = of(out, ev.Receipt)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.REJECTED, ev.Reason.CONFLICT)
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.CONFLICTING_ARGUMENTS]


def test_a_duplicate_with_a_forged_approval_is_rejected_and_alerted():
    policy = Policy(approval_required_actions=frozenset({"refund"}), approval_keys=KEYS)
    base = intent()
    good = sign_approval(APPROVER, KEY, "a1", base.args_hash, "", 10_000)
    state, _ = run([intent(approval=good)], policy=policy)
    forged = sign_approval(FORGER, KEY, "a1", base.args_hash, "", 10_000)
    state2, out = run([intent(approval=forged)], state, policy)
    assert state2 == state
    assert of(out, ev.Receipt)[0].reason is ev.Reason.APPROVAL
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.APPROVAL_MISMATCH]


def test_a_duplicate_after_its_approval_expired_still_gets_the_original_outcome():
    policy = Policy(approval_required_actions=frozenset({"refund"}), approval_keys=KEYS)
    base = intent()
    good = sign_approval(APPROVER, KEY, "a1", base.args_hash, "", 2_500)
    state, _ = run([intent(approval=good), claim(),
                    outcome(OS.SUCCEEDED, external_id="pay-1")], policy=policy)
    _, out = run([intent(approval=good, at_ms=5_000)], state, policy)
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.SUCCEEDED


def test_attempts_with_unknown_outcomes_never_end_in_a_definite_failure():
    # Every attempt ends unknown, every lookup says not found (a deduplicating target):
    # the target may still hold the effect, so an operator decides, with an alert.
    events: list[ev.InputEvent] = [intent()]
    at = 2_000
    for n in (1, 2, 3):
        events += [claim(attempt=n, claim_id=f"c{n}", at_ms=at),
                   outcome(OS.UNKNOWN, attempt=n, claim_id=f"c{n}", at_ms=at + 1),
                   reconciled(RS.NOT_FOUND, attempt=n, claim_id=f"r{n}", at_ms=at + 20_000,
                              dedup=True)]
        at += 40_000
    state, out = run(events)
    assert state.phase is Phase.NEEDS_OPERATOR
    assert of(out, ev.Receipt)[-1].status is ev.ReceiptStatus.NEEDS_RECONCILIATION
    assert ev.AlertKind.RECONCILIATION_REQUIRED in [a.kind for a in of(out, ev.Alert)]


def test_a_grant_that_came_too_late_to_call_does_not_use_up_an_attempt():
    events: list[ev.InputEvent] = [intent()]
    for n in range(1, 7):  # more lapses than max_attempts (3)
        events += [claim(attempt=n, claim_id=f"c{n}", at_ms=n * 1_000),
                   outcome(OS.NOT_CALLED, attempt=n, claim_id=f"c{n}", at_ms=n * 1_000 + 600)]
    state, out = run(events, policy=Policy(max_attempts=3, retry_backoff_ms=0))
    assert (state.phase, state.attempt, state.lapses) == (Phase.RESERVED, 7, 6)
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.STALLED]  # said once


# --- from the second mutation run's survivors ---------------------------------------------


def test_a_duplicate_intent_gets_the_keys_status_detail():
    declined = ev.AttemptOutcome("o-declined", KEY, 1, "c1", OS.FAILED, 3_000, "",
                                 "card declined")
    state, _ = run([intent(), claim(), declined])
    _, out = run([intent(at_ms=4_000)], state)
    (receipt,) = of(out, ev.Receipt)
    assert len(out) == 1
    assert (receipt.status, receipt.detail) == (ev.ReceiptStatus.FAILED, "card declined")


def test_every_dispatch_carries_the_intents_payload():
    payload = '{"memo":"rent for march"}'
    state, out = run([intent(payload_json=payload), claim(),
                      outcome(OS.NOT_APPLIED, at_ms=3_000)])
    assert [(d.attempt, d.payload_json) for d in of(out, ev.Dispatch)] == [
        (1, payload), (2, payload)]
    assert state.payload_json == payload


def _two_unknown_attempts(second_result: ev.ReconcileResult | None) -> list[ev.InputEvent]:
    """Attempts 1 and 2 end unknown; attempt 1's lookup finds nothing (dedup: resend)."""
    events: list[ev.InputEvent] = [
        intent(), claim(1, "c1", 2_000), outcome(OS.UNKNOWN, 1, "c1", 2_001),
        reconciled(RS.NOT_FOUND, 1, "r1", 20_000, dedup=True),
        claim(2, "c2", 30_000), outcome(OS.UNKNOWN, 2, "c2", 30_001)]
    return events + ([second_result] if second_result else [])


def test_a_holders_late_definite_report_settles_only_its_own_unknown_attempt():
    # attempt 2's holder answers after all: attempt 1 is still unknown, so using up the
    # attempts (max 3) must end with an operator, never in a definite failure
    events = _two_unknown_attempts(None) + [
        outcome(OS.NOT_APPLIED, 2, "c2", 30_002),
        claim(3, "c3", 31_000), outcome(OS.NOT_APPLIED, 3, "c3", 31_001)]
    state, out = run(events)
    assert (state.phase, state.unknown_attempts) == (Phase.NEEDS_OPERATOR, 1)
    assert of(out, ev.Receipt)[-1].status is ev.ReceiptStatus.NEEDS_RECONCILIATION


def test_an_operators_not_applied_settles_only_the_attempt_it_answers():
    events = _two_unknown_attempts(reconciled(RS.NOT_FOUND, 2, "r2", 50_000, dedup=False)) + [
        resolution(RES.NOT_APPLIED, attempt=2, at_ms=60_000),
        claim(3, "c3", 70_000), outcome(OS.NOT_APPLIED, 3, "c3", 70_001)]
    state, out = run(events)
    assert (state.phase, state.unknown_attempts) == (Phase.NEEDS_OPERATOR, 1)
    assert of(out, ev.Receipt)[-1].status is ev.ReceiptStatus.NEEDS_RECONCILIATION


def test_an_effect_found_after_the_key_failed_is_alerted_with_the_lookup_as_source():
    state, _ = run([intent(), claim(), outcome(OS.FAILED)])
    found = reconciled(RS.FOUND, external_id="pay-1", dedup=False)
    state2, out = run([found], state)
    assert state2.phase is Phase.SUCCEEDED
    (alert,) = of(out, ev.Alert)
    assert (alert.kind, alert.source_event_id) == (ev.AlertKind.LATE_EFFECT, found.event_id)


def test_a_lookup_result_for_a_key_that_is_not_live_changes_nothing():
    state, out = run([reconciled(RS.NOT_FOUND)])  # a key this ledger never had
    assert (state, out) == (absent(KEY), [])
    settled, _ = run([intent(), claim(), outcome(OS.SUCCEEDED, external_id="pay-1")])
    late = reconciled(RS.NOT_FOUND, at_ms=3_000 + POLICY.replay_window_ms + 1)
    state, out = run([late], settled)
    assert (state, out) == (settled.sealed(), [])


def test_a_forged_signature_with_non_ascii_characters_is_refused_not_raised():
    """Found by the coverage-guided fuzzer: hmac.compare_digest raises TypeError on a str
    with non-ASCII characters, which crashed the processor on a hostile intent."""
    from ledger_stream.domain.approval import ApprovalKeys, approval_problem
    from ledger_stream.domain.events import Approval

    forged = intent(approval=Approval("ap", "h", "", 10**13, "sig\u00e9\u2603"))
    dev = ApprovalKeys(dev_secret=b"secret")
    assert approval_problem(forged, dev, True, 1_000) == "approval signature invalid"
    keyed = intent(approval=Approval("ap", "h", "", 10**13, "sig\u00e9\u2603", APPROVER.key_id))
    assert approval_problem(keyed, KEYS, True, 1_000) == "approval signature invalid"
