"""Invariants of the decision table over random interleavings (hypothesis).

Events for one key arrive in any order and any number: intents (identical, conflicting,
with another workflow version), claims by several connectors for any attempt number,
outcomes of every kind (stale ones too), reconcile results and operator resolutions, with
time moving forward by random steps (sometimes past the replay window).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ledger_stream.domain import Policy, absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Freeze, Hold
from ledger_stream.domain.state import Phase
from tests.factories import KEY, claim, intent, now_of, outcome, reconciled, resolution

pytestmark = pytest.mark.timeout(120)

POLICY = Policy(replay_window_ms=50_000, retry_backoff_ms=100, max_attempts=4,
                clock_skew_ms=200)
ARGS = [{"amount": 100}, {"amount": 200}]
CLAIM_IDS = ["c1", "c2", "c3"]
EXT_IDS = ["pay-1", "pay-2"]


@st.composite
def event_at(draw, at_ms: int) -> ev.InputEvent:
    kind = draw(st.sampled_from(["intent", "claim", "claim", "outcome", "outcome",
                                 "reconcile", "operator"]))
    attempt = draw(st.integers(1, 4))
    claim_id = draw(st.sampled_from(CLAIM_IDS))
    if kind == "intent":
        version = draw(st.sampled_from(["1.0", "1.0", "2.0"]))
        return intent(args=draw(st.sampled_from(ARGS)), at_ms=at_ms,
                      workflow=ev.Workflow("g", version))
    if kind == "claim":
        return claim(attempt, claim_id, at_ms, lease_ms=draw(st.sampled_from([50, 5_000])),
                     fenced=draw(st.booleans()))
    if kind == "outcome":
        return outcome(draw(st.sampled_from(list(ev.OutcomeStatus))), attempt, claim_id, at_ms,
                       external_id=draw(st.sampled_from(EXT_IDS)))
    if kind == "reconcile":
        return reconciled(draw(st.sampled_from(list(ev.ReconcileStatus))), attempt, claim_id,
                          at_ms, dedup=draw(st.booleans()),
                          external_id=draw(st.sampled_from(EXT_IDS)))
    return resolution(draw(st.sampled_from(list(ev.Resolution))), attempt, at_ms,
                      external_id=draw(st.sampled_from(EXT_IDS)))


@st.composite
def histories(draw) -> list[ev.InputEvent]:
    at = 1_000
    events: list[ev.InputEvent] = [intent(args=draw(st.sampled_from(ARGS)), at_ms=at,
                                          workflow=ev.Workflow("g", "1.0"))]
    for _ in range(draw(st.integers(1, 40))):
        at += draw(st.sampled_from([0, 1, 10, 100, 3_000, 60_000]))
        events.append(draw(event_at(at)))
    return events


@pytest.mark.parametrize("pregrant_ms", [0, 5_000])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_invariants_hold_for_any_interleaving(pregrant_ms, events):
    policy = replace(POLICY, pregrant_lease_ms=pregrant_ms)
    state = absent(KEY)
    pregranted = 0  # Dispatches carrying a pre-grant
    grants: dict[int, set[str]] = {}
    dispatched_attempts: list[int] = []
    success_ids: set[str] = set()
    duplicate_alerts = 0
    sealed = False
    reconciled_attempts: list[int] = []
    for event in events:
        before = state
        decision = decide(state, event, policy, now_of(event))
        state, outs = decision.state, decision.outputs
        answers = Counter(type(o) for o in outs)
        # The pre-grant: one Dispatch carries it, the first; it lives only while attempt 1
        # is RESERVED, or as the lease of its fencer's grant; within it only a fenced claim
        # is granted, under its end.
        pregranted += sum(1 for o in outs if isinstance(o, ev.Dispatch) and o.lease_until_ms)
        assert pregranted <= (1 if pregrant_ms else 0)
        if state.pregrant_until_ms:
            assert state.attempt == 1 and (state.phase is Phase.RESERVED or (
                state.phase is Phase.DISPATCHED
                and state.lease_until_ms == state.pregrant_until_ms))
        if isinstance(event, ev.AttemptClaim) and before.phase is Phase.RESERVED \
                and now_of(event) < before.pregrant_until_ms:
            for grant in (o for o in outs if isinstance(o, ev.Grant)):
                assert event.fenced and grant.lease_until_ms == before.pregrant_until_ms

        for o in outs:
            if isinstance(o, ev.Grant):
                grants.setdefault(o.attempt, set()).add(o.claim_id)
            if isinstance(o, ev.Dispatch):
                dispatched_attempts.append(o.attempt)
                assert o.args_hash == state.args_hash, "a dispatch carries the reserved args"
            if isinstance(o, ev.Alert) and o.kind is ev.AlertKind.DUPLICATE_EFFECT:
                duplicate_alerts += 1

        # One grant per attempt number, ever.
        assert all(len(ids) == 1 for ids in grants.values()), grants
        # A conflicting or held intent never dispatches.
        if isinstance(event, ev.Intent) and before.phase is not Phase.ABSENT:
            assert not answers[ev.Dispatch]
        # Every claim gets exactly one answer naming its claim id.
        if isinstance(event, ev.AttemptClaim):
            replies = [o for o in outs if isinstance(o, ev.Grant | ev.Held | ev.Reconcile
                                                     | ev.Done)]
            assert len(replies) == 1 and replies[0].claim_id == event.claim_id
        # Every intent gets exactly one receipt naming its event id.
        if isinstance(event, ev.Intent):
            mine = [o for o in outs if isinstance(o, ev.Receipt)
                    and o.intent_event_id == event.event_id]
            assert len(mine) == 1
        # Two different successful external ids never pass without a duplicate_effect.
        reports_effect = (
            isinstance(event, ev.AttemptOutcome) and event.status is ev.OutcomeStatus.SUCCEEDED
            or isinstance(event, ev.ReconcileResult) and event.status is ev.ReconcileStatus.FOUND
        )
        if reports_effect and before.phase is not Phase.ABSENT:
            success_ids.add(event.external_id)  # type: ignore[union-attr]
        if len(success_ids) > 1:
            assert duplicate_alerts >= 1
        # A key reconciles each attempt at most once, so the attempt number names the
        # Reconcile a result answers; a result that finds nothing counts only for the
        # attempt being reconciled.
        if state.phase is Phase.RECONCILING and before.phase is not Phase.RECONCILING:
            assert state.attempt not in reconciled_attempts, (state.attempt, events)
            reconciled_attempts.append(state.attempt)
        if isinstance(event, ev.ReconcileResult) \
                and event.status is not ev.ReconcileStatus.FOUND \
                and not (before.phase is Phase.RECONCILING
                         and event.attempt == before.attempt):
            assert not outs and state.attempt == before.attempt
            assert state.phase in (before.phase, Phase.EXPIRED)  # sealed at its time
        # An expired key is never reserved or dispatched again.
        if sealed:
            assert state.phase is Phase.EXPIRED and not answers[ev.Dispatch]
        sealed = sealed or state.phase is Phase.EXPIRED

    # Attempts are dispatched in order, each once.
    assert dispatched_attempts == sorted(set(dispatched_attempts))


# --- the pre-grant against freezes and timers ---------------------------------------------
# ``stall_after`` is shorter than the pre-grant here (a processor refuses to start so:
# tests/processor/test_pregrant_setting.py); no timer acts within the pre-grant whatever it
# is (its deadline is its end plus the skew margin), and the timers after it (the plain
# copy, the fenced holder's reconciliation) are checked never to make a second caller.
# "c1" is the one connector that fenced the pre-granted Dispatch (a fence admits one): its
# claims are fenced, and it calls when its claim is appended before the pre-grant's end,
# whatever the answer. "c2" and "c3" claim plainly and call only on a Grant. A claim may be
# read after the partition clock moved past its own record's time (the intents topic read
# ahead): the generator runs the clock ahead of the attempts log for a whole history.
PREGRANTED = replace(POLICY, pregrant_lease_ms=5_000, stall_after_ms=1_000)
FROZEN = Hold(Freeze("", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f-1", 0))
# An event, its partition time, the freeze, a claim's own record time (0: the clock).
Step = tuple[ev.InputEvent, int, Hold | None, int]


@st.composite
def frozen_histories(draw) -> list[Step]:
    """An intent at 1,000 (its pre-grant ends at 6,000), then timers, claims and other
    events, with a freeze over one stretch of time; its unfreeze releases the key. Claims
    are appended to the attempts log at ``at``; the partition clock that decides them (and
    fires the timers, and says whether the freeze is in force) may run ``ahead`` of it all
    history long: the intents topic read ahead, by a constant margin."""
    at = 1_000
    steps: list[Step] = [(intent(at_ms=at, workflow=ev.Workflow("g", "1.0")), at, None, 0)]
    ahead = draw(st.sampled_from([0, 0, 700, 3_000, 6_000]))
    since = draw(st.sampled_from([2_000, 1_000, 3_000, 5_000, 10**9]))  # 10**9: none
    until = since + draw(st.sampled_from([3_000, 1_000, 10_000, 100_000]))
    for _ in range(draw(st.integers(1, 30))):
        at += draw(st.sampled_from([700, 100, 1_500, 0, 3_000, 60_000]))
        clock = at + ahead
        if since < until <= clock:  # the unfreeze, once
            steps.append((ev.Release(KEY, FROZEN.freeze.scope), clock, None, 0))
            until = since
        hold = FROZEN if since <= clock < until else None
        kind = draw(st.sampled_from(["claim", "timer", "claim", "timer", "other"]))
        if kind == "timer":
            steps.append((ev.Timer(KEY, clock), clock, hold, 0))
        elif kind == "claim":
            cid = draw(st.sampled_from(["c1", "c2", "c1", "c3"]))
            steps.append((claim(draw(st.sampled_from([1, 1, 1, 2])), cid, clock,
                                lease_ms=draw(st.sampled_from([50, 5_000])),
                                fenced=cid == "c1"), clock, hold, at))
        else:
            event = draw(event_at(clock))
            if not isinstance(event, ev.AttemptClaim | ev.Intent):
                steps.append((event, clock, hold, 0))
    return steps


# A Timer under a freeze within the pre-grant (an older release's stall timer held the key
# there), the fencer claims, the unfreeze releases it and another connector claims (found
# by a read of the code, 2026-12-06).
@example([(intent(at_ms=1_000, workflow=ev.Workflow("g", "1.0")), 1_000, None, 0),
          (ev.Timer(KEY, 2_500), 2_500, FROZEN, 0),
          (claim(1, "c1", 3_000, fenced=True), 3_000, FROZEN, 0),
          (ev.Release(KEY, FROZEN.freeze.scope), 3_500, None, 0),
          (claim(1, "c2", 7_000), 7_000, None, 0)])
# Claims read after the intents topic moved the clock past the pre-grant's end (found by
# hostile reviews, 2026-12-07): the fencer's under a freeze, then the unfreeze and a plain
# claim; a plain claim appended before the fencer's.
@example([(intent(at_ms=1_000, workflow=ev.Workflow("g", "1.0")), 1_000, None, 0),
          (claim(1, "c1", 7_000, fenced=True), 7_000, FROZEN, 5_000),
          (ev.Release(KEY, FROZEN.freeze.scope), 7_500, None, 0),
          (claim(1, "c2", 9_000), 9_000, None, 9_000)])
@example([(intent(at_ms=1_000, workflow=ev.Workflow("g", "1.0")), 1_000, None, 0),
          (claim(1, "c2", 7_000), 7_000, None, 3_000),
          (claim(1, "c1", 7_000, fenced=True), 7_000, None, 4_000)])
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frozen_histories())
def test_a_pre_grant_makes_no_second_call_under_freezes_and_timers(steps):
    """Two callers of attempt 1, or a later attempt dispatched to start while the fencer may
    still be calling, is a second effect at a target that does not deduplicate."""
    policy, state, end = PREGRANTED, absent(KEY), 0
    callers: set[str] = set()  # of attempt 1
    fencer_granted = False
    for event, now, hold, appended in steps:
        decision = decide(state, event, policy, now, hold, appended_ms=appended)
        state = decision.state
        for o in decision.outputs:
            if isinstance(o, ev.Dispatch) and o.lease_until_ms:
                end = o.lease_until_ms
            if isinstance(o, ev.Grant) and o.attempt == 1:
                callers.add(o.claim_id)
                fencer_granted |= o.claim_id == "c1" and o.lease_until_ms == end
            if isinstance(o, ev.Dispatch) and o.attempt > 1 and now < end:
                assert fencer_granted or o.not_before_ms >= end + policy.clock_skew_ms, steps
        if isinstance(event, ev.AttemptClaim) and event.fenced and event.attempt == 1 \
                and (appended or now) < end:
            callers.add(event.claim_id)  # the fencer calls without waiting for an answer
        assert len(callers) <= 1, (callers, steps)
        if state.pregrant_until_ms:
            assert state.attempt == 1 and (state.phase in (Phase.RESERVED, Phase.HELD) or (
                state.phase is Phase.DISPATCHED
                and state.lease_until_ms == state.pregrant_until_ms))
