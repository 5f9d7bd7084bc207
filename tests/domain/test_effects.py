"""Reports of effects (successes, lookups that found one) are never dropped or mislabelled.

Regression tests for the review's decision defects 11, 12, 13 and 16 (two successes with
empty external ids; a stale ``found`` while the next attempt is in flight).
"""

from __future__ import annotations

import pytest

from ledger_stream.domain import Policy
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import Phase
from tests.domain.decisions import of, run
from tests.factories import claim, intent, outcome, reconciled, resolution

pytestmark = pytest.mark.timeout(30)

OS, RS, RES, AK = ev.OutcomeStatus, ev.ReconcileStatus, ev.Resolution, ev.AlertKind
POLICY = Policy(retry_backoff_ms=0, clock_skew_ms=0, max_attempts=3)


def alerts(outputs) -> list[ev.AlertKind]:
    return [a.kind for a in of(outputs, ev.Alert)]


def success(attempt: int, claim_id: str, at_ms: int, ext: str, dedup: bool = False):
    report = outcome(OS.SUCCEEDED, attempt, claim_id, at_ms, external_id=ext)
    return ev.AttemptOutcome(report.event_id, report.key, attempt, claim_id, OS.SUCCEEDED,
                             at_ms, ext, "", dedup)


def test_a_second_send_with_the_same_key_derived_id_is_a_duplicate_effect():
    # SMTP: the Message-ID derives from the key, so a zombie's second send reports the same
    # external id as the first. Another claim reporting it at a target that does not
    # deduplicate is a second effect.
    state, _ = run([intent(), claim(1, "c1", 2_000), success(1, "c1", 3_000, "<k@ledger>")],
                   policy=POLICY)
    state2, out = run([success(1, "zombie", 4_000, "<k@ledger>")], state, POLICY)
    assert alerts(out) == [AK.DUPLICATE_EFFECT]
    assert state2.duplicate_effects == 1


def test_the_same_id_from_another_claim_at_a_deduplicating_target_is_not_a_duplicate():
    state, _ = run([intent(), claim(1, "c1", 2_000), success(1, "c1", 3_000, "pay-1", True)],
                   policy=POLICY)
    _, out = run([success(1, "c2", 4_000, "pay-1", dedup=True)], state, POLICY)
    assert out == []


def test_two_successes_with_empty_external_ids_are_a_duplicate():
    state, _ = run([intent(), claim(1, "c1", 2_000), success(1, "c1", 3_000, "")],
                   policy=POLICY)
    _, out = run([success(1, "c2", 4_000, "", dedup=True)], state, POLICY)
    assert alerts(out) == [AK.DUPLICATE_EFFECT]


def operator_moved_on() -> list[ev.InputEvent]:
    """Attempt 1's holder went silent; an operator said "not applied": attempt 2 is open."""
    return [intent(at_ms=1_000), claim(1, "c1", 2_000, lease_ms=1_000),
            claim(1, "c2", 5_000), reconciled(RS.UNQUERYABLE, 1, "c2", 5_100, dedup=False),
            resolution(RES.NOT_APPLIED, 1, 6_000)]


def test_a_known_effect_settles_the_key_before_the_next_attempt_is_granted():
    state, _ = run(operator_moved_on(), policy=POLICY)
    assert (state.phase, state.attempt) == (Phase.RESERVED, 2)
    late = success(1, "c1", 6_500, "eff-1")  # attempt 1 did apply after all
    settled, out = run([late], state, POLICY)
    assert (settled.phase, settled.external_id) == (Phase.SUCCEEDED, "eff-1")
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.SUCCEEDED
    # The next claim for attempt 2 is told the attempt is over: no second call.
    _, answer = run([claim(2, "c3", 7_000)], settled, POLICY)
    assert answer == [ev.Done(settled.key, 2, "c3", 7_000)]


def test_a_stale_success_while_the_next_attempt_is_granted_settles_and_alerts():
    state, _ = run([*operator_moved_on(), claim(2, "c3", 7_000)], policy=POLICY)
    assert state.phase is Phase.DISPATCHED
    settled, out = run([success(1, "c1", 7_500, "eff-1")], state, POLICY)
    assert settled.phase is Phase.SUCCEEDED
    assert alerts(out) == [AK.DUPLICATE_EFFECT]  # attempt 2's holder may be calling now
    # Attempt 2's holder reports its own, second effect: alerted again, never lost.
    _, out2 = run([success(2, "c3", 8_000, "eff-2")], settled, POLICY)
    assert alerts(out2) == [AK.DUPLICATE_EFFECT]


def test_a_success_after_failed_is_recorded_and_alerted_as_a_late_effect():
    state, _ = run([*operator_moved_on()[:-1], resolution(RES.FAILED, 1, 6_000)],
                   policy=POLICY)
    assert state.phase is Phase.FAILED
    settled, out = run([success(1, "c1", 6_500, "eff-1")], state, POLICY)
    assert (settled.phase, settled.external_id) == (Phase.SUCCEEDED, "eff-1")
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.SUCCEEDED
    assert alerts(out) == [AK.LATE_EFFECT]


def test_a_stale_found_while_the_next_attempt_is_in_flight_is_not_a_false_duplicate():
    # Attempt 1 unknown, lookup (dedup target) said not found: attempt 2 granted. A second,
    # slower lookup for attempt 1 now finds the key's effect: it is attempt 2's (the lookup
    # is by key), not a second one.
    events = [intent(), claim(1, "c1", 2_000), outcome(OS.UNKNOWN, 1, "c1", 3_000),
              reconciled(RS.NOT_FOUND, 1, "r1", 13_000, dedup=True),
              claim(2, "c2", 14_000)]
    state, _ = run(events, policy=POLICY)
    assert (state.phase, state.attempt) == (Phase.DISPATCHED, 2)
    found = reconciled(RS.FOUND, 1, "r2", 14_500, dedup=True, external_id="pay-1")
    settled, out = run([found], state, POLICY)
    assert settled.phase is Phase.SUCCEEDED and alerts(out) == []
    # ... and attempt 2's holder reporting that same effect agrees with it.
    _, out2 = run([success(2, "c2", 15_000, "pay-1", dedup=True)], settled, POLICY)
    assert out2 == []


def test_the_holder_confirming_the_effect_a_lookup_found_is_not_a_duplicate():
    # A deadline reconciled a slow holder; the lookup found its effect; then the holder
    # reports it. One effect, at a target that does not deduplicate.
    events = [intent(), claim(1, "c1", 2_000), claim(1, "c2", 13_000),
              reconciled(RS.FOUND, 1, "c2", 13_100, dedup=False, external_id="m-1")]
    state, _ = run(events, policy=POLICY)
    assert state.phase is Phase.SUCCEEDED
    _, out = run([success(1, "c1", 13_200, "m-1")], state, POLICY)
    assert out == []


def test_a_sealed_key_still_reports_a_second_effect():
    policy = Policy(replay_window_ms=10_000)
    state, _ = run([intent(), claim(1, "c1", 2_000), success(1, "c1", 3_000, "pay-1")],
                   policy=policy)
    sealed, out = run([success(1, "c9", 20_000, "pay-2")], state, policy)
    assert sealed.phase is Phase.EXPIRED and alerts(out) == [AK.DUPLICATE_EFFECT]


def test_a_success_on_a_failed_and_sealed_key_is_a_late_effect_not_a_duplicate():
    # Found by review: the sealed key kept "failed" and no external id, and the first effect
    # reported after the window was labelled a second one.
    policy = Policy(replay_window_ms=10_000)
    state, _ = run([intent(), claim(1, "c1", 2_000), outcome(OS.FAILED, 1, "c1", 3_000)],
                   policy=policy)
    for report in (success(1, "c9", 20_000, "pay-1"),
                   reconciled(RS.FOUND, 1, "r1", 20_000, external_id="pay-1")):
        sealed, out = run([report], state, policy)
        assert sealed.phase is Phase.EXPIRED and alerts(out) == [AK.LATE_EFFECT]
        (receipt,) = of(out, ev.Receipt)
        assert (receipt.status, receipt.external_id) == (ev.ReceiptStatus.SUCCEEDED, "pay-1")
        # The sealed key now holds that effect: the same report again is nothing new, and
        # another effect is a second one.
        assert alerts(run([report], sealed, policy)[1]) == []
        assert alerts(run([success(1, "c8", 21_000, "pay-2")], sealed, policy)[1]) == [
            AK.DUPLICATE_EFFECT]


def test_the_holder_confirming_an_operators_applied_after_the_window_is_not_a_duplicate():
    # Found by the simulation: the operator said "applied" (the effect the holder made),
    # the key was sealed, then the holder's own late success arrived. Same effect.
    policy = Policy(replay_window_ms=10_000, retry_backoff_ms=0, clock_skew_ms=0)
    events = [intent(), claim(1, "c1", 2_000, lease_ms=1_000), claim(1, "c2", 5_000),
              reconciled(RS.UNQUERYABLE, 1, "c2", 5_100, dedup=False),
              resolution(RES.APPLIED, 1, 6_000, external_id="eff-1")]
    state, _ = run(events, policy=policy)
    assert state.phase is Phase.SUCCEEDED
    sealed, out = run([success(1, "c1", 30_000, "eff-1")], state, policy)
    assert sealed.phase is Phase.EXPIRED and out == []
