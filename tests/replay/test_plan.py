"""The replay plan's judgement, without a broker or a graph: intents answered by the
decision core itself on key states, as the dry run answers them."""

from __future__ import annotations

import dataclasses

from ledger_lab.harness.approvers import TEST_APPROVER, trusted
from ledger_stream import sign_approval
from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.replay import Kind, exit_status, judge_replay
from ledger_stream.replay.report import as_json, as_table
from ledger_stream.upgrade.verdict import Asked
from tests.factories import intent

KEY = "acme/refund/inv-1"
POLICY = Policy(approval_keys=trusted(TEST_APPROVER),
                approval_required_actions=frozenset({"refund"}))
NOW = 1_000_000


def approved(asked: ev.Intent, expires_at_ms: int = NOW + 600_000,
             payload_hash: str | None = None) -> ev.Intent:
    approval = sign_approval(TEST_APPROVER, asked.key, "ap-1",
                             payload_hash or asked.args_hash, "", expires_at_ms)
    return dataclasses.replace(asked, approval=approval)


def held(args: dict) -> KeyState:
    """The key's state once the ledger has reserved it for ``args``."""
    return decide(KeyState(key=KEY), approved(intent(KEY, args)), POLICY, NOW).state


def ask(state: KeyState, asked: ev.Intent, now: int = NOW) -> Asked:
    decision = decide(state, asked, POLICY, now)
    receipt = next(o for o in decision.outputs if isinstance(o, ev.Receipt))
    return Asked(asked, state, receipt)


def kinds(*asked: Asked, **kw) -> list[Kind]:
    return [f.kind for f in judge_replay("c1", 3, "loop", ("tools",), asked, **kw).findings]


def test_the_same_key_and_arguments_is_safe():
    assert kinds(ask(held({"a": 1}), approved(intent(KEY, {"a": 1})))) == [Kind.SAFE]


def test_a_key_the_ledger_does_not_hold_is_a_new_effect():
    assert kinds(ask(KeyState(key=KEY), approved(intent(KEY, {"a": 1})))) == [Kind.NEW_EFFECT]


def test_other_arguments_are_rejected():
    plan = judge_replay("c1", 3, "update", ("tools",),
                        [ask(held({"a": 1}), approved(intent(KEY, {"a": 2})))])
    assert [f.kind for f in plan.findings] == [Kind.REJECTED]
    assert "other arguments" in plan.findings[0].detail
    assert plan.verdict is Kind.REJECTED


def test_an_expired_approval_or_one_for_other_arguments_is_stale():
    expired = approved(intent(KEY, {"a": 1}), expires_at_ms=NOW - 1)
    assert kinds(ask(KeyState(key=KEY), expired)) == [Kind.STALE_APPROVAL]
    other = approved(intent(KEY, {"a": 1}), payload_hash="0" * 64)
    assert kinds(ask(KeyState(key=KEY), other)) == [Kind.STALE_APPROVAL]


def test_a_duplicates_approval_expiry_is_not_judged_again():
    """The ledger answers the original receipt: the approval's expiry no longer matters."""
    expired = approved(intent(KEY, {"a": 1}), expires_at_ms=NOW - 1)
    assert kinds(ask(held({"a": 1}), expired)) == [Kind.SAFE]


def test_a_key_asked_twice_keeps_its_worst_answer():
    state = held({"a": 1})
    same, other = approved(intent(KEY, {"a": 1})), approved(intent(KEY, {"a": 2}))
    assert kinds(ask(state, same), ask(state, other)) == [Kind.REJECTED]
    assert kinds(ask(state, other), ask(state, same)) == [Kind.REJECTED]


def test_verdicts_and_exit_status():
    safe = judge_replay("c3", 5, "loop", (), [])
    assert safe.verdict is Kind.SAFE and exit_status([safe]) == 0
    new = judge_replay("c2", 2, "loop", ("tools",),
                       [ask(KeyState(key=KEY), approved(intent(KEY, {"a": 1})))])
    waiting = judge_replay("c1", 1, "loop", ("approval",), [], waiting_in=("approval",))
    error = judge_replay("c0", 0, "input", ("model",), [ask(held({"a": 1}), approved(
        intent(KEY, {"a": 1})))], error="ValueError: boom")
    assert (new.verdict, waiting.verdict, error.verdict) == (Kind.NEW_EFFECT, Kind.WAITING,
                                                             Kind.ERROR)
    for unsafe in (new, waiting, error):
        assert exit_status([safe, unsafe]) == 1
    assert '"exit_status": 1' in as_json("t", [safe, new])
    table = as_table("t", [safe, new])
    assert "asks the ledger nothing" in table and "2 checkpoints, 1 safe" in table


def test_a_recorded_key_the_replay_does_not_ask_is_an_orphan():
    paid = intent("acme/refund/inv-0", {"a": 1})
    reserved = decide(KeyState(key=paid.key), approved(paid), POLICY, NOW).state
    asked = [ask(KeyState(key=KEY), approved(intent(KEY, {"a": 1})))]
    plan = judge_replay("c1", 1, "loop", ("tools",), asked,
                        rerun=[(paid, reserved), (paid, reserved)])
    assert [(f.kind, f.key) for f in plan.findings] == [(Kind.NEW_EFFECT, KEY),
                                                        (Kind.ORPHAN, "acme/refund/inv-0")]
    assert plan.verdict is Kind.ORPHAN and exit_status([plan]) == 1
    assert "its effect stays" in plan.findings[1].detail
    # Asked again: no orphan (the ledger's answer to the ask is the finding).
    assert kinds(*asked, rerun=[(intent(KEY, {"a": 1}), held({"a": 1}))]) == [
        Kind.NEW_EFFECT]


def test_a_recorded_key_that_made_no_effect_is_no_orphan():
    """Rejected by the ledger (it holds nothing: an approval missing), or failed."""
    rejected = intent("acme/refund/inv-0", {"a": 1})  # no approval: the ledger rejects it
    answer = ask(KeyState(key=rejected.key), rejected)
    assert answer.receipt.status is ev.ReceiptStatus.REJECTED
    refused = decide(KeyState(key=rejected.key), rejected, POLICY, NOW).state
    failed = held({"a": 1}).changed(phase=Phase.FAILED)
    assert kinds(rerun=[(rejected, refused), (intent(KEY, {"a": 1}), failed)]) == []
    sealed = held({"a": 1}).changed(phase=Phase.EXPIRED,
                                    sealed_outcome=Phase.SUCCEEDED.value)
    assert kinds(rerun=[(intent(KEY, {"a": 1}), sealed)]) == [Kind.ORPHAN]
    sealed_failed = sealed.changed(sealed_outcome=Phase.FAILED.value)
    assert kinds(rerun=[(intent(KEY, {"a": 1}), sealed_failed)]) == []
    paid = held({"a": 1}).changed(phase=Phase.SUCCEEDED)
    assert kinds(rerun=[(intent(KEY, {"a": 1}), paid)]) == [Kind.ORPHAN]


def test_a_failed_key_with_an_attempt_nobody_knew_the_outcome_of_is_an_orphan():
    """Failed, or sealed as failed, after an attempt whose outcome was unknown: the core
    counts that attempt as possibly applied (late_effect), so its effect may exist (found
    by a hostile review: such a key was dropped from the orphans)."""
    unknown = held({"a": 1}).changed(phase=Phase.FAILED, unknown_attempts=1)
    assert kinds(rerun=[(intent(KEY, {"a": 1}), unknown)]) == [Kind.ORPHAN]
    sealed = unknown.changed(phase=Phase.EXPIRED, sealed_outcome=Phase.FAILED.value)
    assert kinds(rerun=[(intent(KEY, {"a": 1}), sealed)]) == [Kind.ORPHAN]


def test_a_key_after_the_replay_stopped_is_not_reached_not_an_orphan():
    paid = intent("acme/refund/inv-0", {"a": 1})
    reserved = decide(KeyState(key=paid.key), approved(paid), POLICY, NOW).state
    stopped = judge_replay("c1", 1, "loop", ("approval",), [], waiting_in=("approval",),
                           rerun=[(paid, reserved)])
    assert stopped.verdict is Kind.WAITING and exit_status([stopped]) == 1
    assert [(f.kind, f.key) for f in stopped.findings] == [
        (Kind.WAITING, "acme/refund/inv-0"), (Kind.WAITING, "")]
    assert "the replay stopped in approval before asking it: not reached" in (
        stopped.findings[0].detail)
    raised = judge_replay("c1", 1, "loop", ("tools",), [], error="ValueError: boom",
                          rerun=[(paid, reserved)])
    assert [f.kind for f in raised.findings] == [Kind.ERROR, Kind.ERROR]
    assert "the graph raised before asking it: not reached" in raised.findings[0].detail


def test_a_key_of_a_node_the_stopped_replay_ran_is_still_an_orphan():
    """The replay ran the node that recorded K1, asked K2 there, then stopped at an
    approval: K1 was passed, not left unreached (a hostile review found it hidden as
    "not reached", the double payment the finding exists to show)."""
    paid = intent("acme/refund/inv-0", {"a": 1})
    reserved = decide(KeyState(key=paid.key), approved(paid), POLICY, NOW).state
    other = approved(intent("acme/refund/inv-9", {"a": 1}))
    assert other.workflow.node == paid.workflow.node
    plan = judge_replay("c1", 1, "loop", ("refund",), [ask(KeyState(key=other.key), other)],
                        waiting_in=("approval",), rerun=[(paid, reserved)])
    assert (Kind.ORPHAN, "acme/refund/inv-0") in [(f.kind, f.key) for f in plan.findings]
    assert plan.verdict is Kind.ORPHAN
