"""The soak's checker on hand-made ground truth: each violation it exists for is found, and a
clean history passes. (The soak itself, on a real cluster: test_soak.py.)"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from ledger_lab.chaos.checker import (
    COLD_START,
    LEAD_MS,
    FaultAt,
    Journaled,
    TargetTruth,
    check,
    target_truth,
)
from ledger_lab.chaos.plan import FAULT_KINDS, PlanError, plan_faults
from ledger_lab.falsify.evidence import LedgerTopics
from ledger_lab.harness.approvers import seeded_approver, trusted
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import sign_approval
from ledger_stream.domain.keys import args_hash, canonical_json

APPROVER = seeded_approver("chaos", "s")
KEYS = trusted(APPROVER)
REFUND = "acme/refund/r1"
CREDIT = "acme/credit/c1"


def intent(key: str, amount: int, approved: bool = True) -> ev.Intent:
    args = {"amount": amount}
    approval = sign_approval(APPROVER, key, "ap", args_hash(args), "", 10**13) \
        if approved and "/refund/" in key else None
    target = "payments" if "/refund/" in key else "ledger-db"
    return ev.Intent(uuid.uuid4().hex, key, "acme", key.split("/")[1], target,
                     canonical_json(args), args_hash(args), ev.Workflow("g", "1"), 1_000,
                     approval=approval)


def receipt(i: ev.Intent, status: ev.ReceiptStatus, reason: ev.Reason = ev.Reason.NONE,
            key_status: ev.ReceiptStatus | None = None, paid: str = "") -> ev.Receipt:
    if status is ev.ReceiptStatus.SUCCEEDED and not paid and i.target == "payments":
        paid = f"pay-{i.key}"  # the payment the target holds (see truth())
    return ev.Receipt(uuid.uuid4().hex, i.key, i.event_id, status, reason, i.args_hash, 1, 2,
                      external_id=paid, key_status=key_status or status)


def alert(key: str, kind: ev.AlertKind, at_ms: int = 3) -> ev.Alert:
    return ev.Alert(uuid.uuid4().hex, key, kind, "e", "", at_ms)


def topics(intents: list[ev.Intent], receipts: list[ev.Receipt],
           alerts: list[ev.Alert] = (), grants: tuple[str, ...] = ("a",)
           ) -> LedgerTopics:  # type: ignore[assignment]
    granted = [ev.Grant(i.key, 1, claim, 0, 0) for i in intents[:1] for claim in grants]
    return LedgerTopics(intents, [], [], [], [], receipts, list(alerts), granted)


def payment_call(key: str, body_amount: int, result: str = "created",
                 attempt: str = "a") -> dict[str, Any]:
    return {"idempotency_key": key, "result": result, "attempt_id": attempt,
            "body_hash": args_hash({"amount": body_amount}), "at": 20.0}


def truth(calls: list[dict[str, Any]] = (), credits: list[tuple[str, int]] = ()
          ) -> TargetTruth:  # type: ignore[assignment]
    effects = []
    for call in calls:
        if call["result"] == "created":
            effects.append({"idempotency_key": call["idempotency_key"],
                            "body_hash": call["body_hash"],
                            "id": f"pay-{call['idempotency_key']}"})
    return target_truth({"requests": list(calls), "effects": effects}, list(credits))


def journal(*acked: ev.Intent) -> Journaled:
    return Journaled({i.event_id: {"key": i.key} for i in acked},
                     {i.event_id for i in acked}, 0)


def kinds(verdict: Any) -> list[str]:
    return sorted(v["kind"] for v in verdict.violations)


def test_a_clean_history_passes() -> None:
    r, c = intent(REFUND, 5), intent(CREDIT, 7)
    dup = dataclasses.replace(r, event_id="dup")
    verdict = check(topics([r, c, dup], [receipt(r, ev.ReceiptStatus.SUCCEEDED),
                                         receipt(c, ev.ReceiptStatus.SUCCEEDED),
                                         receipt(dup, ev.ReceiptStatus.SUCCEEDED)]),
                    truth([payment_call(REFUND, 5)], [(CREDIT, 7)]), journal(r, c, dup),
                    KEYS, ())
    assert verdict.ok, verdict.violations
    assert verdict.figures["keys_by_effect_count"] == {"1": 2}


def test_a_second_effect_without_an_alert_fails_and_with_one_is_the_window() -> None:
    r = intent(REFUND, 5)
    calls = [payment_call(REFUND, 5), payment_call(REFUND, 5, "replayed")]
    done = [receipt(r, ev.ReceiptStatus.SUCCEEDED)]
    assert kinds(check(topics([r], done), truth(calls), journal(r), KEYS, ())) \
        == ["duplicate_effect"]
    alerted = check(topics([r], done, [alert(REFUND, ev.AlertKind.DUPLICATE_EFFECT)]),
                    truth(calls), journal(r), KEYS, ())
    assert alerted.ok and len(alerted.windows) == 1
    # Calls that stopped before the target's commit are not effects.
    failed_call = [payment_call(REFUND, 5, "fault:error_before_commit"), payment_call(REFUND, 5)]
    assert check(topics([r], done), truth(failed_call), journal(r), KEYS, ()).ok
    c = intent(CREDIT, 7)
    assert kinds(check(topics([c], [receipt(c, ev.ReceiptStatus.SUCCEEDED)]),
                       truth(credits=[(CREDIT, 7), (CREDIT, 7)]), journal(c), KEYS, ())) \
        == ["duplicate_effect"]


def test_lost_work_is_found() -> None:
    r, c = intent(REFUND, 5), intent(CREDIT, 7)
    # r acknowledged but never on the topic; c on the topic but still in progress.
    verdict = check(topics([c], [receipt(c, ev.ReceiptStatus.IN_PROGRESS)]), truth(),
                    journal(r, c), KEYS, ())
    assert kinds(verdict) == ["lost_acknowledged", "unsettled"]
    # An intent with no receipt naming it, on a key that settled through another intent.
    again = intent(CREDIT, 7)
    verdict = check(topics([c, again], [receipt(c, ev.ReceiptStatus.SUCCEEDED)]),
                    truth(credits=[(CREDIT, 7)]), journal(c), KEYS, ())
    assert kinds(verdict) == ["unanswered"]
    # Waiting for an operator is settled.
    assert check(topics([c], [receipt(c, ev.ReceiptStatus.NEEDS_RECONCILIATION)],
                        [alert(CREDIT, ev.AlertKind.RECONCILIATION_REQUIRED, 30_000)]),
                 truth(), journal(c), KEYS, [FaultAt(20_000, "target-kill", "postgres")]).ok


def test_wrong_answers_and_wrong_effects_are_found() -> None:
    r = intent(REFUND, 5)
    assert kinds(check(topics([r], [receipt(r, ev.ReceiptStatus.SUCCEEDED)]), truth(),
                       journal(r), KEYS, ())) == ["success_without_effect", "wrong_answer"]
    assert kinds(check(topics([r], [receipt(r, ev.ReceiptStatus.FAILED)]),
                       truth([payment_call(REFUND, 5)]), journal(r), KEYS, ())) \
        == ["effect_of_failed_key"]
    conflict = intent(REFUND, 6)
    verdict = check(topics([r, conflict], [
        receipt(r, ev.ReceiptStatus.SUCCEEDED),
        receipt(conflict, ev.ReceiptStatus.REJECTED, ev.Reason.CONFLICT,
                ev.ReceiptStatus.SUCCEEDED)], [alert(REFUND, ev.AlertKind.CONFLICTING_ARGUMENTS)]),
        truth([payment_call(REFUND, 6)]), journal(r, conflict), KEYS, ())
    assert kinds(verdict) == ["wrong_arguments"]  # the conflict's amount was paid
    unapproved = intent("acme/refund/r2", 5, approved=False)
    verdict = check(topics([unapproved], [receipt(unapproved, ev.ReceiptStatus.SUCCEEDED)],
                           [alert("acme/refund/r2", ev.AlertKind.APPROVAL_MISMATCH)]),
                    truth([payment_call("acme/refund/r2", 5)]), journal(unapproved), KEYS, ())
    assert kinds(verdict) == ["unapproved_effect", "wrong_answer"]
    assert kinds(check(topics([], []), truth([payment_call("acme/refund/x", 1)]), journal(),
                       KEYS, ())) == ["effect_without_intent"]


def test_alerts_must_match_the_inputs() -> None:
    r, conflict = intent(REFUND, 5), intent(REFUND, 6)
    receipts = [receipt(r, ev.ReceiptStatus.SUCCEEDED),
                receipt(conflict, ev.ReceiptStatus.REJECTED, ev.Reason.CONFLICT,
                        ev.ReceiptStatus.SUCCEEDED)]
    paid = truth([payment_call(REFUND, 5)])
    assert kinds(check(topics([r, conflict], receipts), paid, journal(r, conflict), KEYS,
                       ())) == ["missing_alert"]
    stray = [alert(REFUND, ev.AlertKind.APPROVAL_MISMATCH),
             alert(REFUND, ev.AlertKind.DUPLICATE_EFFECT),
             alert(REFUND, ev.AlertKind.POISON_INPUT)]
    verdict = check(topics([r], receipts[:1], stray), paid, journal(r), KEYS, ())
    # A duplicate_effect alert with one effect is the ledger saying a second one may be on
    # its way (a stale success): counted, not failed.
    assert kinds(verdict) == ["unexplained_alert"] * 2


def test_an_operational_alert_needs_a_fault_that_can_cause_it_on_its_key() -> None:
    """The intents are made at 1,000 ms; the key's first claim is at 25,000 ms, held by
    payments-connector-2 (incarnation 7); the alerts come at 30,000 ms."""
    r, c = intent(REFUND, 5), intent(CREDIT, 7)
    receipts = [receipt(r, ev.ReceiptStatus.SUCCEEDED), receipt(c, ev.ReceiptStatus.SUCCEEDED)]
    claims = [ev.AttemptClaim("c1", REFUND, 1, "a", "payments-connector-2.7", 4_000, 25_000),
              ev.AttemptClaim("c2", CREDIT, 1, "b", "ledger-db-connector-1.3", 4_000, 25_000)]

    def verdict(kind: ev.AlertKind, key: str, *faults: FaultAt, acted_ms: int | None = None,
                reconcile_ms: int | None = None) -> list[str]:
        seen = topics([r, c], receipts, [alert(key, kind, 30_000)])
        seen.claims.extend(claims)
        if reconcile_ms is not None:  # the processor asked for a reconciliation of the key
            seen.reconciles.append(ev.Reconcile(key, 1, "a", "payments", reconcile_ms))
        paid = truth([payment_call(REFUND, 5)], [(CREDIT, 7)])
        if acted_ms is not None:  # when the sandbox's log shows the fault acting on REFUND
            paid = dataclasses.replace(paid, faulted_keys={REFUND: acted_ms})
        return kinds(check(seen, paid, journal(r, c), KEYS, faults))

    lost = ev.AlertKind.RECONCILIATION_REQUIRED
    assert verdict(lost, REFUND) == ["unexplained_alert"]  # no fault at all
    assert verdict(lost, REFUND, FaultAt(26_000, "target-kill", "payments-sandbox")) == []
    assert verdict(lost, REFUND, FaultAt(26_000, "pause", "payments-connector-2")) == []
    assert verdict(lost, REFUND, FaultAt(26_000, "connector-kill", "payments-connector-2")) \
        == []
    assert verdict(lost, REFUND, FaultAt(26_000, "broker-kill", "broker-1")) == []
    # A sandbox fault explains it only where the sandbox's log shows it acting on the key,
    # by the time of the alert.
    armed = FaultAt(1_000, "target-fault", "payments-sandbox")
    assert verdict(lost, REFUND, armed, acted_ms=26_000) == []
    assert verdict(lost, REFUND, armed, acted_ms=31_000) == ["unexplained_alert"]
    # The sandbox logs a delayed request when it answers, 5 s after it came: the fault acted
    # from its arrival (the 60-minute soak found alerts 2-3 s before such log times).
    assert target_truth({"requests": [
        {**payment_call(REFUND, 5, result="fault:delay_before_commit"), "at": 32.0},
        {**payment_call(REFUND, 5, result="fault:delay_before_commit"), "at": 31.0}],
        "effects": []}, []).faulted_keys == {REFUND: 26_000}
    assert target_truth({"requests": [
        {**payment_call(REFUND, 5, result="fault:error_before_commit"), "at": 26.0}],
        "effects": []}, []).faulted_keys == {REFUND: 26_000}
    # Reconcile jobs are not claimed: once the key is being reconciled, any connector of its
    # target may be the one running the job; before that, only a holder counts.
    for kind in ("pause", "connector-kill"):
        other = FaultAt(26_000, kind, "payments-connector-1")
        assert verdict(lost, REFUND, other, reconcile_ms=27_000) == []
        assert verdict(lost, REFUND, other) == ["unexplained_alert"]
        assert verdict(lost, REFUND, other, reconcile_ms=26_000 + 15_001) \
            == ["unexplained_alert"]
        assert verdict(lost, REFUND, FaultAt(26_000, kind, "ledger-db-connector-1"),
                       reconcile_ms=27_000) == ["unexplained_alert"]  # another target's
    # A sandbox crash fault that acted on another key's request made the sandbox exit with
    # this key's call in flight (found by the 10-minute soak): the sandbox's log says when.
    crash = {**payment_call("acme/refund/other", 1, result="fault:crash_after_commit"),
             "at": 26.5}
    assert target_truth({"requests": [crash], "effects": []}, []).sandbox_crashes_ms \
        == (26_500,)

    def crashed(at_ms: int) -> list[str]:
        seen = topics([r, c], receipts, [alert(REFUND, lost, 30_000)])
        seen.claims.extend(claims)
        paid = dataclasses.replace(truth([payment_call(REFUND, 5)], [(CREDIT, 7)]),
                                   sandbox_crashes_ms=(at_ms,))
        return kinds(check(seen, paid, journal(r, c), KEYS, ()))

    assert crashed(26_500) == []
    assert crashed(31_000) == ["unexplained_alert"]  # after the alert
    # Faults that cannot lose this key's outcome, or came too early or too late.
    for fault in (FaultAt(26_000, "target-fault", "payments-sandbox"),  # acted elsewhere
                  FaultAt(26_000, "pause", "payments-connector-1"),  # not the holder
                  FaultAt(26_000, "connector-kill", "payments-connector-1"),
                  FaultAt(26_000, "target-kill", "postgres"),
                  FaultAt(26_000, "connector-kill", "ledger-db-connector-1"),
                  FaultAt(26_000, "agent-kill", "agent-1"),
                  FaultAt(26_000, "processor-kill", "processor-1"),
                  FaultAt(25_000 - 20_000, "target-kill", "payments-sandbox"),  # before
                  FaultAt(31_000, "target-kill", "payments-sandbox")):  # after the alert
        assert verdict(lost, REFUND, fault) == ["unexplained_alert"], fault
    assert verdict(lost, CREDIT, FaultAt(26_000, "target-kill", "postgres")) == []
    assert verdict(lost, CREDIT, FaultAt(26_000, "pause", "ledger-db-connector-1")) == []
    # Grants too late to call: a slow processor explains it, a killed agent does not.
    stalled = ev.AlertKind.STALLED
    assert verdict(stalled, CREDIT, FaultAt(26_000, "pause", "processor-2")) == []
    assert verdict(stalled, CREDIT, FaultAt(26_000, "processor-kill", "processor-1")) == []
    assert verdict(stalled, CREDIT, FaultAt(26_000, "agent-kill", "agent-1")) \
        == ["unexplained_alert"]
    # An operator phase's graceful stop of a processor or of a connector of the key's target
    # (or the start after it) slows the ledger: it explains a stalled alert, never a lost
    # outcome.
    assert verdict(stalled, CREDIT, FaultAt(26_000, "processor-stop", "processor-1")) == []
    assert verdict(stalled, CREDIT, FaultAt(26_000, "connector-stop",
                                            "ledger-db-connector-1")) == []
    assert verdict(stalled, CREDIT, FaultAt(26_000, "connector-stop",
                                            "payments-connector-1")) == ["unexplained_alert"]
    assert verdict(lost, REFUND, FaultAt(26_000, "connector-stop", "payments-connector-2")) \
        == ["unexplained_alert"]
    # The ledger's cold start (the soak's first intents): a fresh cluster's first
    # transactions make grants readable too late for the soak's 4 s lease, with no fault
    # (a fresh-clone CI run: acme/credit/a1-1-1 lapsed three times in its first 6.6 s). It
    # explains a stalled alert of a key first claimed within LEAD_MS of it, never a lost
    # outcome.
    cold = FaultAt(20_000, COLD_START, "ledger")
    assert verdict(stalled, CREDIT, cold) == []
    assert verdict(stalled, REFUND, cold) == []
    assert verdict(stalled, CREDIT, dataclasses.replace(cold, at_ms=25_000 - LEAD_MS - 1)) \
        == ["unexplained_alert"]  # long before the key's first claim: warm by then
    assert verdict(lost, CREDIT, cold) == ["unexplained_alert"]
    # A fault acts until its victim is back: a broker killed 20 s before the key's first
    # claim and running again 3 s before it (its partitions' leadership then moves back).
    away = FaultAt(5_000, "broker-kill", "broker-1", until_ms=22_000)
    assert verdict(stalled, CREDIT, away) == []
    assert verdict(stalled, CREDIT, dataclasses.replace(away, until_ms=0)) \
        == ["unexplained_alert"]
    assert verdict(stalled, CREDIT, dataclasses.replace(away, until_ms=25_000 - LEAD_MS - 1)) \
        == ["unexplained_alert"]


def test_a_key_waiting_for_an_operator_needs_its_alert() -> None:
    c = intent(CREDIT, 7)
    waiting = [receipt(c, ev.ReceiptStatus.NEEDS_RECONCILIATION)]
    cause = (FaultAt(20_000, "target-kill", "postgres"),)
    assert kinds(check(topics([c], waiting), truth(), journal(c), KEYS, cause)) \
        == ["missing_alert"]
    alerted = [alert(CREDIT, ev.AlertKind.RECONCILIATION_REQUIRED, 30_000)]
    assert check(topics([c], waiting, alerted), truth(), journal(c), KEYS, cause).ok


def test_the_plan_deals_every_kind_and_is_a_function_of_the_seed() -> None:
    plan = plan_faults(7, 60, 20, FAULT_KINDS)
    assert plan == plan_faults(7, 60, 20, FAULT_KINDS)
    assert plan != plan_faults(8, 60, 20, FAULT_KINDS)
    assert len(plan) == 20 and {f.kind for f in plan} == set(FAULT_KINDS)
    assert all(5 <= f.at_s < 60 for f in plan)
    assert [f.at_s for f in plan] == sorted(f.at_s for f in plan)
    with pytest.raises(PlanError, match="unknown fault kind"):
        plan_faults(1, 60, 3, ("broker-kill", "meteor"))
    with pytest.raises(PlanError, match="no time"):
        plan_faults(1, 4, 3, FAULT_KINDS)


def test_effects_at_the_wrong_target_calls_without_grant_and_wrong_answers_are_found() -> None:
    r, c = intent(REFUND, 5), intent(CREDIT, 7)
    done = [receipt(r, ev.ReceiptStatus.SUCCEEDED), receipt(c, ev.ReceiptStatus.SUCCEEDED)]
    # The credit paid at the payments target (and its own rows absent).
    verdict = check(topics([r, c], done), truth([payment_call(REFUND, 5),
                                                 payment_call(CREDIT, 7)]),
                    journal(r, c), KEYS, ())
    assert "effect_at_wrong_target" in kinds(verdict)
    # A call whose claim no Grant names.
    verdict = check(topics([r], done[:1]), truth([payment_call(REFUND, 5, attempt="zz")]),
                    journal(r), KEYS, ())
    assert kinds(verdict) == ["call_without_grant"]
    # A conflicting intent told "succeeded"; a success naming another payment.
    conflict = intent(REFUND, 6)
    told = [*done[:1], receipt(conflict, ev.ReceiptStatus.SUCCEEDED)]
    verdict = check(topics([r, conflict], told,
                           [alert(REFUND, ev.AlertKind.CONFLICTING_ARGUMENTS)]),
                    truth([payment_call(REFUND, 5)]), journal(r, conflict), KEYS, ())
    assert kinds(verdict) == ["wrong_answer"]
    other = [receipt(r, ev.ReceiptStatus.SUCCEEDED, paid="pay-elsewhere")]
    assert kinds(check(topics([r], other), truth([payment_call(REFUND, 5)]), journal(r),
                       KEYS, ())) == ["wrong_answer"]
    # PostgreSQL's receipt row fences: two rows fail even with the ledger's alert.
    verdict = check(topics([c], done[1:], [alert(CREDIT, ev.AlertKind.DUPLICATE_EFFECT)]),
                    truth(credits=[(CREDIT, 7), (CREDIT, 7)]), journal(c), KEYS, ())
    assert kinds(verdict) == ["duplicate_effect"]


def test_an_intent_both_unapproved_and_conflicting_may_get_either_alert() -> None:
    r = intent(REFUND, 5)
    both = intent(REFUND, 6, approved=False)
    for kind, reason in ((ev.AlertKind.CONFLICTING_ARGUMENTS, ev.Reason.CONFLICT),
                         (ev.AlertKind.APPROVAL_MISMATCH, ev.Reason.APPROVAL)):
        receipts = [receipt(r, ev.ReceiptStatus.SUCCEEDED),
                    receipt(both, ev.ReceiptStatus.REJECTED, reason, ev.ReceiptStatus.SUCCEEDED)]
        verdict = check(topics([r, both], receipts, [alert(REFUND, kind)]),
                        truth([payment_call(REFUND, 5)]), journal(r, both), KEYS, ())
        assert verdict.ok, verdict.violations


@pytest.mark.parametrize(("argv", "said"), [
    (["--duration", "0"], "--duration must be positive"),
    (["--agents", "0"], "--agents must be at least 1"),
    (["--kinds", "broker-kill,meteor"], "unknown fault kind(s) meteor"),
    (["--duration", "3", "--faults", "2"], "leaves no time for faults"),
    (["--grow-by", "6", "--grow-at", "1.5"], "between 0 and 1"),
    (["--upgrade", "--upgrade-at", "0.5", "--grow-by", "6", "--grow-at", "0.5"],
     "same second"),
])
def test_the_chaos_command_refuses_bad_flags_before_starting_anything(argv, said, capsys,
                                                                      tmp_path) -> None:
    from ledger_stream.cli.main import main

    assert main(["chaos", *argv, "--workdir", str(tmp_path / "w")]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "w" / "kafka").exists()


def test_the_chaos_command_has_help(capsys) -> None:
    from ledger_stream.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["chaos", "--help"])
    assert done.value.code == 0
    assert "--seed" in capsys.readouterr().out
