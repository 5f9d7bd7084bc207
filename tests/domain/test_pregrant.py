"""The pre-granted first attempt (docs/protocol.md, "The pre-granted first attempt"): an
exactly-once processor's first Dispatch of a key carries a lease for the connector that
fences its record; a fenced claim within it is granted under that lease, a plain claim
waits for its end, and no other Dispatch ever carries a pre-grant."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_stream.domain import decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Freeze, Hold, withhold
from ledger_stream.domain.deadlines import due_ms
from ledger_stream.domain.outputs import dispatch_for
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.domain.transitions import Decision
from tests.domain.decisions import POLICY, of, run
from tests.factories import KEY, claim, intent, outcome, reconciled, resolution

pytestmark = pytest.mark.timeout(30)

OS, RS, RES = ev.OutcomeStatus, ev.ReconcileStatus, ev.Resolution
LEASE = 30_000
PRE = replace(POLICY, pregrant_lease_ms=LEASE)
AT = 1_000  # the intent's partition time (tests.factories.intent)
END = AT + LEASE  # the pre-grant's end
FROZEN = Hold(Freeze("", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f-1", 500))


def reserved(policy: Policy = PRE) -> KeyState:
    state, _ = run([intent(at_ms=AT)], policy=policy)
    return state


def test_the_first_dispatch_carries_the_pre_grant_and_the_key_keeps_its_end():
    state, out = run([intent(at_ms=AT)], policy=PRE)
    (dispatch,) = of(out, ev.Dispatch)
    assert (dispatch.attempt, dispatch.lease_until_ms) == (1, END)
    assert (state.phase, state.pregrant_until_ms) == (Phase.RESERVED, END)


def test_without_the_pre_grant_the_first_dispatch_carries_none():
    state, out = run([intent(at_ms=AT)])
    assert of(out, ev.Dispatch)[0].lease_until_ms == 0 and state.pregrant_until_ms == 0


def test_a_fenced_claim_within_the_pre_grant_is_granted_under_the_dispatchs_lease():
    state, out = run([claim(at_ms=2_000, lease_ms=5_000, fenced=True)], reserved(), PRE)
    (grant,) = of(out, ev.Grant)
    # Not the claim's time plus its lease: the connector called under the Dispatch's.
    assert (grant.claim_id, grant.lease_until_ms) == ("c1", END)
    assert (state.phase, state.granted_claim_id, state.lease_until_ms) == (
        Phase.DISPATCHED, "c1", END)
    assert state.pregrant_until_ms == END  # the holder is the fencer (deadlines.FENCED)
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.IN_PROGRESS


def test_a_plain_claim_within_the_pre_grant_waits_for_its_end():
    before = reserved()
    state, out = run([claim(at_ms=END - 1)], before, PRE)
    assert state == before
    (held,) = out
    assert isinstance(held, ev.Held) and (held.claim_id, held.lease_until_ms) == ("c1", END)


@pytest.mark.parametrize("fenced", [False, True])
def test_a_claim_at_or_after_the_pre_grants_end_is_decided_as_without_one(fenced):
    state, out = run([claim(at_ms=END, lease_ms=10_000, fenced=fenced)], reserved(), PRE)
    (grant,) = of(out, ev.Grant)
    assert grant.lease_until_ms == END + 10_000 and state.phase is Phase.DISPATCHED


def test_the_pre_granted_holder_claiming_again_gets_the_same_grant_and_others_wait():
    granted, _ = run([claim(at_ms=2_000, fenced=True)], reserved(), PRE)
    same, out = run([claim(at_ms=2_500, fenced=True)], granted, PRE)
    assert same == granted and of(out, ev.Grant)[0].lease_until_ms == END
    _, out = run([claim(claim_id="c2", at_ms=3_000, fenced=True)], granted, PRE)
    (held,) = out
    assert isinstance(held, ev.Held) and held.lease_until_ms == END


def test_the_timers_copy_carries_no_pre_grant():
    before, out = run([intent(at_ms=AT)], policy=PRE)
    (first,) = of(out, ev.Dispatch)
    state, out = run([ev.Timer(KEY, AT + PRE.stall_after_ms)], before, PRE)
    (copy,) = of(out, ev.Dispatch)
    assert copy.dispatch_id == first.dispatch_id  # the same Dispatch, offered again
    assert (first.lease_until_ms, copy.lease_until_ms) == (END, 0)
    assert state.pregrant_until_ms == 0  # it acts once the pre-grant has run out


@pytest.mark.parametrize("path", ["not_applied", "not_called", "reconciled", "operator"])
def test_a_later_attempts_dispatch_carries_no_pre_grant(path):
    granted = [intent(at_ms=AT), claim(at_ms=2_000, fenced=True)]
    then = {
        "not_applied": [outcome(OS.NOT_APPLIED, at_ms=3_000)],
        "not_called": [outcome(OS.NOT_CALLED, at_ms=3_000)],
        "reconciled": [outcome(OS.UNKNOWN, at_ms=3_000),
                       reconciled(RS.NOT_FOUND, at_ms=4_000, dedup=True)],
        "operator": [outcome(OS.UNKNOWN, at_ms=3_000),
                     reconciled(RS.UNQUERYABLE, at_ms=4_000, dedup=False),
                     resolution(RES.NOT_APPLIED, at_ms=5_000)],
    }[path]
    state, out = run([*granted, *then], policy=PRE)
    dispatches = of(out, ev.Dispatch)
    assert [d.attempt for d in dispatches] == [1, 2]
    assert [d.lease_until_ms for d in dispatches] == [END, 0]
    assert (state.phase, state.attempt, state.pregrant_until_ms) == (Phase.RESERVED, 2, 0)


def test_an_unknown_report_without_a_grant_clears_the_pre_grant():
    state, _ = run([outcome(OS.UNKNOWN, claim_id="c9", at_ms=2_000)], reserved(), PRE)
    assert state.phase is Phase.RECONCILING and state.pregrant_until_ms == 0


def test_a_freeze_withholds_the_pre_granted_dispatch_and_the_release_sends_a_plain_one():
    decision = decide(KeyState(KEY), intent(at_ms=AT), PRE, AT, FROZEN)
    held = decision.state
    assert held.phase is Phase.HELD and held.pregrant_until_ms == 0
    assert not of(decision.outputs, ev.Dispatch)
    released = decide(held, ev.Release(KEY, FROZEN.freeze.scope), PRE, 5_000)
    (dispatch,) = of(released.outputs, ev.Dispatch)
    assert dispatch.lease_until_ms == 0 and released.state.pregrant_until_ms == 0


def test_a_fenced_claim_within_the_pre_grant_is_granted_under_a_freeze():
    """Its connector calls without waiting for the answer, under a grant given before the
    freeze: the ledger records it as the holder, as for a grant given before the freeze."""
    decision = decide(reserved(), claim(at_ms=2_000, fenced=True), PRE, 2_000, FROZEN)
    assert decision.state.phase is Phase.DISPATCHED
    assert of(decision.outputs, ev.Grant)[0].lease_until_ms == END


def test_a_plain_claim_after_the_pre_grant_under_a_freeze_is_held_as_before():
    decision = decide(reserved(), claim(at_ms=END), PRE, END, FROZEN)
    assert decision.state.phase is Phase.HELD and decision.state.pregrant_until_ms == 0
    assert not of(decision.outputs, ev.Grant)


def test_a_row_keeps_the_pre_grant_and_a_row_from_before_it_reads_none():
    state = reserved()
    assert KeyState.from_row(state.to_row()) == state
    older = KeyState.from_row(state.to_row()[:-1])  # written before the field existed
    assert older.pregrant_until_ms == 0
    assert older == state.changed(pregrant_until_ms=0)


# --- a pre-grant outlives a freeze's hold -----------------------------------------------
# A connector that fenced the pre-granted Dispatch calls without waiting for any answer, so
# nothing the processor decides before the pre-grant's end may take the key away from it:
# not a freeze's hold, not a timer, not a new attempt. No timer acts inside a running
# pre-grant, whatever ``stall_after_ms`` (its deadline is its end plus the skew margin:
# deadlines.PREGRANT). A decision that dispatches inside it under a freeze is still held with
# the pre-grant (containment.withhold): an older release's stall timer did so inside a
# pre-grant when ``stall_after_ms`` was shorter, and its rows may still be read. The tests
# below start from that hold.
STALLS_WITHIN = replace(PRE, stall_after_ms=5_000)
STALL_AT = 7_000  # past the intent's old stall deadline (6,000), well within the pre-grant


def held_within(hold: Hold = FROZEN) -> tuple[KeyState, list[ev.OutputEvent]]:
    """The key at 7,000 as an older release's stall timer inside the pre-grant left it
    under ``hold``: its plain copy withheld (HELD, or an operator's with no room)."""
    before = reserved(STALLS_WITHIN)
    copy = Decision(before.changed(stall_alerted=1), (dispatch_for(before, STALL_AT),))
    decision = withhold(before, copy, hold, STALL_AT)
    return decision.state, list(decision.outputs)


def test_no_timer_acts_inside_a_running_pre_grant():
    """With ``stall_after_ms`` shorter than the pre-grant, a Timer inside it changes nothing:
    the key's deadline is the pre-grant's end plus the skew margin."""
    before = reserved(STALLS_WITHIN)
    assert due_ms(before, STALLS_WITHIN) == END + STALLS_WITHIN.clock_skew_ms
    state, out = run([ev.Timer(KEY, STALL_AT)], before, STALLS_WITHIN, FROZEN)
    assert (state, out) == (before, [])


def _granted(outputs: list[ev.OutputEvent], attempt: int = 1) -> list[str]:
    return [g.claim_id for g in of(outputs, ev.Grant) if g.attempt == attempt]


@pytest.mark.parametrize("then", ["failed", "unknown", "silent"])
def test_a_stall_timer_under_a_freeze_leaves_the_pre_grant_to_its_fencer(then):
    """The defect a final read found (2026-12-06): intent at 1,000 (pre-granted to 31,000),
    an older release's stall timer at 7,000 while a hold freeze covers the key. The key went
    HELD and dropped the
    pre-grant; the fencer's claim got Held, its failed or unknown report was not the
    holder's, and the unfreeze's plain Dispatch was granted to a second connector: two calls
    at a target that does not deduplicate. Now the fencer is the holder, whatever follows."""
    _, out = run([intent(at_ms=AT)], policy=STALLS_WITHIN)
    state, timed = held_within()
    assert state.phase is Phase.HELD and not of(timed, ev.Dispatch)  # the freeze
    fenced = claim(claim_id="c1", at_ms=8_000, fenced=True)  # the fencer, already calling
    reports = {"failed": [outcome(OS.FAILED, claim_id="c1", at_ms=9_000)],
               "unknown": [outcome(OS.UNKNOWN, claim_id="c1", at_ms=9_000)],
               "silent": []}[then]  # crashed mid-call
    state, later = run([fenced, *reports], state, STALLS_WITHIN, FROZEN)
    assert _granted(later) == ["c1"]
    state, after = run([ev.Release(KEY, FROZEN.freeze.scope),
                        claim(claim_id="c2", at_ms=25_000),
                        claim(claim_id="c2", at_ms=END + 5_000)], state, STALLS_WITHIN)
    # Nobody but the fencer is ever granted attempt 1, nor is any other attempt dispatched
    # before the fencer's report settles it.
    assert _granted(out + timed + later + after) == ["c1"]
    assert [d.attempt for d in of(after, ev.Dispatch)] == []
    expected = {"failed": Phase.FAILED, "unknown": Phase.RECONCILING,
                "silent": Phase.RECONCILING}[then]  # silent: its lease ran out
    assert state.phase is expected


def test_a_pre_grant_nobody_fenced_is_granted_after_its_end_once_released():
    """A fence that landed though it reported failure (nobody calls, nobody claims): an
    older release's stall timer held the key, the unfreeze dispatches it plainly, and a
    plain claim waits for the pre-grant's end: a delay, never a second call."""
    state, _ = held_within()
    state, out = run([ev.Release(KEY, FROZEN.freeze.scope)], state, STALLS_WITHIN)
    (dispatch,) = of(out, ev.Dispatch)
    assert dispatch.lease_until_ms == 0  # the release's copy carries no pre-grant
    state, out = run([claim(claim_id="c2", at_ms=25_000)], state, STALLS_WITHIN)
    assert [(h.claim_id, h.lease_until_ms) for h in of(out, ev.Held)] == [("c2", END)]
    state, out = run([claim(claim_id="c2", at_ms=END)], state, STALLS_WITHIN)
    assert _granted(out) == ["c2"]


def test_within_the_pre_grant_a_plain_claim_waits_and_the_fencer_is_granted():
    """A connector claiming plainly (a backlog read) waits for the pre-grant's end, and the
    fencer is granted; a Timer in between offers no copy."""
    state, out = run([intent(at_ms=AT), ev.Timer(KEY, STALL_AT)], policy=STALLS_WITHIN)
    assert [d.lease_until_ms for d in of(out, ev.Dispatch)] == [END]
    state, out = run([claim(claim_id="c2", at_ms=8_000),
                      claim(claim_id="c1", at_ms=9_000, fenced=True),
                      claim(claim_id="c2", at_ms=END - 1)], state, STALLS_WITHIN)
    assert _granted(out) == ["c1"]
    assert [h.claim_id for h in of(out, ev.Held)] == ["c2", "c2"]


@pytest.mark.parametrize("path", ["reconciled", "operator"])
def test_no_new_attempt_starts_before_a_pre_grant_nobody_took_has_run_out(path):
    """An unknown report from a claim without a grant (no pre-grant holder on record) sends
    the key to a reconciliation while the pre-grant runs: a fencer could still be calling,
    so the next attempt waits for the pre-grant's end plus the skew margin, as for a lease."""
    then = {
        "reconciled": [reconciled(RS.NOT_FOUND, claim_id="c9", at_ms=3_000, dedup=True)],
        "operator": [reconciled(RS.UNQUERYABLE, claim_id="c9", at_ms=3_000, dedup=False),
                     resolution(RES.NOT_APPLIED, at_ms=4_000)],
    }[path]
    state, out = run([outcome(OS.UNKNOWN, claim_id="c9", at_ms=2_000), *then], reserved(),
                     PRE)
    (dispatch,) = of(out, ev.Dispatch)
    assert dispatch.attempt == 2
    assert dispatch.not_before_ms >= END + PRE.clock_skew_ms
    _, out = run([claim(2, "c2", at_ms=END)], state, PRE)
    assert not _granted(out, 2)


def test_a_full_hold_queue_sends_the_key_to_an_operator_who_cannot_start_another_attempt_early():
    """No room to hold the key (its partition's hold queue is full): an older release's
    stall timer inside the pre-grant sent it to an operator instead. An operator's "not
    applied" before the pre-grant's end still starts attempt 2 no earlier than that end plus
    the skew margin."""
    full = replace(FROZEN, room=False)
    state, _ = held_within(full)
    assert state.phase is Phase.NEEDS_OPERATOR
    _, out = run([resolution(RES.NOT_APPLIED, at_ms=8_000)], state, STALLS_WITHIN)
    (dispatch,) = of(out, ev.Dispatch)
    assert (dispatch.attempt, dispatch.lease_until_ms) == (2, 0)
    assert dispatch.not_before_ms >= END + STALLS_WITHIN.clock_skew_ms


def test_a_release_into_a_second_freezes_hold_keeps_the_pre_grant():
    """Two hold freezes cover the key (``*/refund`` and ``acme/refund``). An older release's
    stall timer inside the pre-grant held it under the first; that one's unfreeze releases
    it into the second's hold while the pre-grant still runs. Dropped there (the hold came
    from HELD, not RESERVED), the second unfreeze's plain Dispatch was granted to another
    connector at 25,000 while the fencer, whose claim Kafka had not yet delivered, was
    calling."""
    second = Hold(Freeze("acme", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f-2", 600))
    state, _ = held_within()
    state, out = run([ev.Release(KEY, FROZEN.freeze.scope)], state, STALLS_WITHIN, second)
    assert (state.phase, state.held_by) == (Phase.HELD, second.freeze.scope)
    assert not of(out, ev.Dispatch)
    state, out = run([ev.Release(KEY, second.freeze.scope),
                      claim(claim_id="c2", at_ms=25_000),
                      claim(claim_id="c1", at_ms=26_000, fenced=True)], state, STALLS_WITHIN)
    assert _granted(out) == ["c1"]  # the fencer; c2 waits for the pre-grant's end
    assert [(h.claim_id, h.lease_until_ms) for h in of(out, ev.Held)] == [("c2", END)]


def test_a_fencer_claiming_in_a_second_freezes_hold_is_granted():
    """As above, the fencer's claim reaching the key while the second freeze holds it: the
    fencer is calling, so it is recorded as the holder."""
    second = Hold(Freeze("acme", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f-2", 600))
    state, _ = held_within()
    state, _ = run([ev.Release(KEY, FROZEN.freeze.scope),
                    claim(claim_id="c1", at_ms=22_000, fenced=True)],
                   state, STALLS_WITHIN, second)
    assert state.phase is Phase.DISPATCHED and state.granted_claim_id == "c1"
    assert state.lease_until_ms == END


# --- the timers act at the pre-grant's end -----------------------------------------------
# A connector that fenced the record and died is not followed by a re-read: its commit put
# the partition's next owner past the record. Only the processor's timers move the key, at
# the pre-grant's end plus the skew margin (deadlines.PREGRANT, deadlines.FENCED), where they
# fell ``stall_after`` later (tests/connectors/test_pregrant_crash_kafka.py on Kafka).
DUE = END + PRE.clock_skew_ms


def test_a_pre_grant_no_fenced_claim_reached_is_offered_plainly_at_its_end_plus_the_skew():
    before = reserved()
    assert due_ms(before, PRE) == DUE
    early, out = run([ev.Timer(KEY, DUE - 1)], before, PRE)
    assert (early, out) == (before, [])
    state, out = run([ev.Timer(KEY, DUE)], before, PRE)
    (copy,) = out  # the plain copy, no alert: the stall timer counts from it
    assert isinstance(copy, ev.Dispatch) and (copy.attempt, copy.lease_until_ms) == (1, 0)
    assert (state.phase, state.pregrant_until_ms, state.stall_alerted) == (Phase.RESERVED, 0, 0)
    assert due_ms(state, PRE) == AT + PRE.stall_after_ms  # as for any dispatch (no send time)
    _, out = run([claim(claim_id="c2", at_ms=DUE + 10, lease_ms=5_000)], state, PRE)
    assert [(g.claim_id, g.lease_until_ms) for g in of(out, ev.Grant)] == [("c2", DUE + 5_010)]


def test_the_stall_timer_alerts_once_the_plain_copy_is_not_claimed_either():
    state, _ = run([ev.Timer(KEY, DUE)], reserved(), PRE)
    stalled_at = AT + PRE.stall_after_ms
    state, out = run([ev.Timer(KEY, stalled_at)], state, PRE)
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.STALLED]
    assert len(of(out, ev.Dispatch)) == 1 and due_ms(state, PRE) is None


def test_the_pre_grants_deadline_counts_from_no_earlier_than_its_dispatch_left():
    """A lagging processor sends the Dispatch after the pre-grant's end (its connector then
    claims plainly): the copy waits for the skew margin past that send time."""
    sent = END + 60_000
    state = decide(KeyState(KEY), intent(at_ms=AT), PRE, AT, sent_ms=sent).state
    assert due_ms(state, PRE) == sent + PRE.clock_skew_ms


@pytest.mark.parametrize("fenced", [False, True])
@pytest.mark.parametrize("at", [DUE, DUE + 1, DUE + 60_000])
def test_a_claim_after_the_pre_grants_timer_is_answered_as_without_it(fenced, at):
    """A timer is liveness only: the grant decision after it is the one without it (the
    partition clock never goes back, so the pre-grant it cleared had ended)."""
    before = reserved()
    timed, _ = run([ev.Timer(KEY, DUE)], before, PRE)
    event = claim(claim_id="c2", at_ms=at, lease_ms=5_000, fenced=fenced)
    assert decide(timed, event, PRE, at).outputs == decide(before, event, PRE, at).outputs


def test_a_fenced_holder_silent_past_its_lease_is_reconciled_at_its_end_plus_the_skew():
    granted, _ = run([claim(at_ms=2_000, fenced=True)], reserved(), PRE)
    assert due_ms(granted, PRE) == DUE
    early, out = run([ev.Timer(KEY, DUE - 1)], granted, PRE)
    assert (early, out) == (granted, [])
    state, out = run([ev.Timer(KEY, DUE)], granted, PRE)
    (reconcile,) = of(out, ev.Reconcile)
    assert (reconcile.attempt, reconcile.claim_id) == (1, "timer")
    assert (state.phase, state.pregrant_until_ms) == (Phase.RECONCILING, 0)
    # The fencer's definite report, read after the timer, still settles the key.
    state, _ = run([outcome(OS.SUCCEEDED, external_id="pay-1", at_ms=DUE + 1)], state, PRE)
    assert (state.phase, state.external_id) == (Phase.SUCCEEDED, "pay-1")


def test_a_plain_holder_keeps_the_stall_margin_past_its_lease():
    """The plain path's crashed holder is settled by the next owner's claim (it re-reads the
    record): the timer stays a late fallback there."""
    granted, _ = run([claim(at_ms=END, lease_ms=5_000)], reserved(), PRE)
    assert granted.pregrant_until_ms == 0
    assert due_ms(granted, PRE) == END + 5_000 + PRE.clock_skew_ms + PRE.stall_after_ms


def test_a_fenced_holder_granted_while_held_is_reconciled_at_its_end_too():
    state, _ = held_within()
    state, _ = run([claim(claim_id="c1", at_ms=8_000, fenced=True)], state, STALLS_WITHIN,
                   FROZEN)
    assert (state.phase, state.pregrant_until_ms) == (Phase.DISPATCHED, END)
    assert due_ms(state, STALLS_WITHIN) == END + STALLS_WITHIN.clock_skew_ms


@pytest.mark.parametrize("status", [OS.NOT_APPLIED, OS.NOT_CALLED])
def test_the_fencers_report_moves_on_without_the_pre_grant(status):
    """Attempt 2 carries no pre-grant and keeps the stall timer (nobody fenced it)."""
    granted, _ = run([claim(at_ms=2_000, fenced=True)], reserved(), PRE)
    state, _ = run([outcome(status, at_ms=3_000)], granted, PRE)
    assert (state.phase, state.attempt, state.pregrant_until_ms) == (Phase.RESERVED, 2, 0)
    assert due_ms(state, PRE) == 3_000 + PRE.retry_backoff_ms + PRE.stall_after_ms
