"""Per-action policy in the decision table: each knob an action may set (replay window,
attempts, retry after a lookup, approval, reversibility) changes that action's decisions and
no other's, and every knob left out keeps the safe ledger-wide behaviour."""

from __future__ import annotations

import pytest

from ledger_lab.harness.approvers import seeded_approver, trusted
from ledger_stream.domain import Policy, decide, due_ms
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import sign_approval
from ledger_stream.domain.policy import ActionRules, LookupRetry
from ledger_stream.domain.state import KeyState, Phase
from tests.domain.decisions import POLICY, of, run
from tests.factories import KEY, claim, intent, outcome, reconciled

pytestmark = pytest.mark.timeout(30)

OS, RS = ev.OutcomeStatus, ev.ReconcileStatus
EMAIL = "acme/send_email/welcome-7"
APPROVER = seeded_approver("approver-1", "k")


def with_rules(action: str = "refund", revision: str = "", **rules: object) -> Policy:
    return Policy(replay_window_ms=POLICY.replay_window_ms,
                  retry_backoff_ms=POLICY.retry_backoff_ms, max_attempts=POLICY.max_attempts,
                  clock_skew_ms=POLICY.clock_skew_ms, approval_keys=trusted(APPROVER),
                  actions={action: ActionRules(**rules)}, revision=revision)  # type: ignore[arg-type]


def reconciling(policy: Policy, key: str = KEY) -> KeyState:
    state, _ = run([intent(key=key), claim(key=key), outcome(OS.UNKNOWN, key=key)],
                   policy=policy)
    return state


# --- attempts -------------------------------------------------------------------------


def test_an_actions_attempts_replace_the_ledgers_for_that_action_only():
    one = with_rules("refund", max_attempts=1, revision="p-abc")
    state, out = run([intent(), claim(), outcome(OS.NOT_APPLIED)], policy=one)
    assert state.phase is Phase.FAILED and len(of(out, ev.Dispatch)) == 1
    (*_, last) = of(out, ev.Receipt)
    assert last.reason is ev.Reason.MAX_ATTEMPTS
    assert "policy p-abc for refund" in last.detail  # the rule that decided is named
    other, _ = run([intent(key=EMAIL), claim(key=EMAIL), outcome(OS.NOT_APPLIED, key=EMAIL)],
                   policy=one)
    assert (other.phase, other.attempt) == (Phase.RESERVED, 2)  # the ledger's 3 attempts


def test_one_attempt_with_an_unknown_outcome_ends_for_an_operator_even_if_not_found():
    """An attempt whose outcome was unknown counts: with one attempt, a lookup that finds
    nothing at a deduplicating target leaves the key to an operator, never failed."""
    one = with_rules("refund", max_attempts=1)
    state, out = run([reconciled(RS.NOT_FOUND, dedup=True)], reconciling(one), one)
    assert state.phase is Phase.NEEDS_OPERATOR and not of(out, ev.Dispatch)
    assert of(out, ev.Receipt)[-1].status is ev.ReceiptStatus.NEEDS_RECONCILIATION


# --- retry after a lookup ---------------------------------------------------------------


@pytest.mark.parametrize(("mode", "reversible", "dedup", "retried"), [
    (LookupRetry.DEDUPLICATING, False, True, True),
    (LookupRetry.DEDUPLICATING, False, False, False),
    (LookupRetry.NEVER, False, True, False),
    (LookupRetry.NEVER, True, False, False),
    (LookupRetry.ALWAYS, True, False, True),
    # Not reversible: "always" is refused at start, and the decision ignores it anyway.
    (LookupRetry.ALWAYS, False, False, False),
])
def test_a_lookup_that_found_nothing_retries_only_as_the_action_allows(
        mode: LookupRetry, reversible: bool, dedup: bool, retried: bool):
    policy = with_rules("refund", retry_after_lookup=mode, reversible=reversible)
    state, out = run([reconciled(RS.NOT_FOUND, dedup=dedup)], reconciling(policy), policy)
    assert (state.phase is Phase.RESERVED) == retried
    assert bool(of(out, ev.Dispatch)) == retried
    if not retried:
        assert state.phase is Phase.NEEDS_OPERATOR
        assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.RECONCILIATION_REQUIRED]


def test_never_retrying_after_a_lookup_says_why_in_the_receipt():
    policy = with_rules("refund", retry_after_lookup=LookupRetry.NEVER, revision="p-1")
    _, out = run([reconciled(RS.NOT_FOUND, dedup=True)], reconciling(policy), policy)
    assert of(out, ev.Receipt)[-1].detail == (
        "not found, and the action's policy retries nothing after a lookup; "
        "policy p-1 for refund")


def test_an_unqueryable_target_needs_an_operator_whatever_the_action_allows():
    policy = with_rules("refund", retry_after_lookup=LookupRetry.ALWAYS, reversible=True)
    state, out = run([reconciled(RS.UNQUERYABLE, dedup=False)], reconciling(policy), policy)
    assert state.phase is Phase.NEEDS_OPERATOR and not of(out, ev.Dispatch)


# --- approval ---------------------------------------------------------------------------


def test_an_action_that_needs_approval_rejects_an_intent_without_one():
    policy = with_rules("refund", approval=True)
    state, out = run([intent()], policy=policy)
    assert state.phase is Phase.ABSENT and not of(out, ev.Dispatch)
    assert of(out, ev.Receipt)[0].reason is ev.Reason.APPROVAL
    signed = sign_approval(APPROVER, KEY, "a1", intent().args_hash, "", 10_000)
    state, out = run([intent(approval=signed)], policy=policy)
    assert state.phase is Phase.RESERVED and of(out, ev.Dispatch)


def test_an_actions_rules_never_lift_the_ledgers_required_approval():
    policy = Policy(approval_required_actions=frozenset({"refund"}),
                    actions={"refund": ActionRules(approval=False)})
    assert policy.requires_approval("refund")
    state, _ = run([intent()], policy=policy)
    assert state.phase is Phase.ABSENT


# --- replay window ----------------------------------------------------------------------


def test_an_actions_shorter_replay_window_seals_its_keys_sooner():
    policy = with_rules("refund", replay_window_ms=10_000)
    done, _ = run([intent(), claim(), outcome(OS.SUCCEEDED, at_ms=3_000)], policy=policy)
    assert due_ms(done, policy) == 3_000 + 10_001
    assert due_ms(done, POLICY) == 3_000 + POLICY.replay_window_ms + 1
    sealed, out = run([intent(at_ms=13_001)], done, policy=policy)
    assert sealed.phase is Phase.EXPIRED
    assert of(out, ev.Receipt)[0].reason is ev.Reason.EXPIRED_KEY
    timer = decide(done, ev.Timer(KEY, 13_001), policy, 13_001)
    assert timer.state.phase is Phase.EXPIRED


def test_an_actions_replay_window_is_never_longer_than_the_ledgers():
    """The history topics keep a key for the ledger-wide window only: a longer one (refused
    at start) would answer from a key the log may have forgotten."""
    policy = with_rules("refund", replay_window_ms=10 * POLICY.replay_window_ms)
    assert policy.replay_window_for("refund") == POLICY.replay_window_ms


# --- defaults ---------------------------------------------------------------------------


def test_an_action_without_rules_decides_as_before():
    assert Policy().rules("refund") == ActionRules()
    assert ActionRules() == ActionRules(
        replay_window_ms=None, max_attempts=None,
        retry_after_lookup=LookupRetry.DEDUPLICATING, approval=False, reversible=False)
    plain, ruled = POLICY, with_rules("send_email", max_attempts=1)
    events: list[ev.InputEvent] = [intent(), claim(), outcome(OS.UNKNOWN),
                                   reconciled(RS.NOT_FOUND, dedup=False)]
    assert run(events, policy=plain) == run(events, policy=ruled)



def test_an_action_without_rules_is_not_cited_in_its_receipt():
    """The ledger-wide values decided: the detail reads as before rules existed (the
    console's queue rows and every reader of the detail keep their width)."""
    policy = with_rules("refund", retry_after_lookup=LookupRetry.NEVER, revision="p-1")
    _, out = run([reconciled(RS.NOT_FOUND, dedup=False, key=EMAIL)],
                 reconciling(policy, EMAIL), policy)
    assert of(out, ev.Receipt)[-1].detail == "not found, and the target does not deduplicate"


@pytest.mark.parametrize("dedup", [False, True])
def test_a_resend_only_the_policy_allows_names_the_policy(dedup: bool):
    """At a target that does not fence duplicates, a resend after a lookup found nothing is
    the action's rule at work (a late first effect would make two): the record says so."""
    policy = with_rules("refund", retry_after_lookup=LookupRetry.ALWAYS, reversible=True,
                        revision="p-1")
    state, out = run([reconciled(RS.NOT_FOUND, dedup=dedup)], reconciling(policy), policy)
    told = [state.status_detail] + [r.detail for r in of(out, ev.Receipt)]
    assert any("attempt 1 not found at the target" in t for t in told), told
    assert any("policy p-1 for refund" in t for t in told) is not dedup, told
