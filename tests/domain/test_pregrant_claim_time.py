"""A fenced claim is judged against the pre-grant's end by its own record's broker time
(``decide``'s ``appended_ms``), not by the partition clock, which the intents topic can
move past that end before the claim is read: appended within the pre-grant, its fencer is
calling, and it is granted whatever the key's freeze or the pre-grant's timer did since."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_stream.domain import decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Freeze, Hold
from ledger_stream.domain.deadlines import due_ms
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.domain.transitions import Decision
from tests.domain.decisions import POLICY, of, run
from tests.factories import KEY, claim, intent, outcome

pytestmark = pytest.mark.timeout(30)

LEASE = 30_000
PRE = replace(POLICY, pregrant_lease_ms=LEASE)
AT = 1_000  # the intent's partition time
END = AT + LEASE  # the pre-grant's end
DUE = END + PRE.clock_skew_ms  # the pre-grant's timer
FROZEN = Hold(Freeze("", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f-1", 500))
HOLDS = {"hold": FROZEN, "none": None}


def reserved() -> KeyState:
    state, _ = run([intent(at_ms=AT)], policy=PRE)
    return state


def _fenced(appended: int, now: int, state: KeyState, hold: Hold | None = None,
            claim_id: str = "c1") -> Decision:
    return decide(state, claim(claim_id=claim_id, at_ms=now, lease_ms=5_000,
                                      fenced=True), PRE, now, hold, appended_ms=appended)


def _grants(outputs: tuple[ev.OutputEvent, ...] | list[ev.OutputEvent]
            ) -> list[tuple[str, int]]:
    return [(g.claim_id, g.lease_until_ms) for g in of(outputs, ev.Grant)]


@pytest.mark.parametrize("hold", HOLDS.values(), ids=HOLDS.keys())
def test_a_fenced_claim_appended_before_the_end_is_granted_when_read_after_it(hold):
    decision = _fenced(END - 1, END + 500, reserved(), hold)
    assert _grants(decision.outputs) == [("c1", END)]
    state = decision.state
    assert (state.phase, state.granted_claim_id, state.pregrant_until_ms) == (
        Phase.DISPATCHED, "c1", END)  # the fencer: its deadline falls at the end (FENCED)
    assert due_ms(state, PRE) == DUE


def test_a_fenced_claim_appended_at_the_end_is_decided_as_without_a_pre_grant():
    decision = _fenced(END, END + 500, reserved())
    assert _grants(decision.outputs) == [("c1", END + 5_500)]
    assert decision.state.pregrant_until_ms == 0
    held = _fenced(END, END + 500, reserved(), FROZEN)
    assert not _grants(held.outputs) and held.state.phase is Phase.HELD


@pytest.mark.parametrize("appended", [0, -1])
def test_without_a_record_time_the_claim_is_judged_at_the_clock(appended):
    """0 (not given) or -1 (the record has no timestamp): the partition clock decides."""
    for now, lease in ((2_000, END), (END, END + 5_000)):
        assert _grants(_fenced(appended, now, reserved()).outputs) == [("c1", lease)]


def test_a_plain_claim_is_judged_by_its_own_time_too():
    """Appended before the end and read after it: held until the end (a fenced claim
    appended before the end may follow it); appended at the end: granted."""
    early = decide(reserved(), claim(at_ms=END, lease_ms=5_000), PRE, END + 5_000,
                   appended_ms=2_000).outputs
    assert not _grants(early)
    assert [(h.claim_id, h.lease_until_ms) for h in of(early, ev.Held)] == [("c1", END)]
    out = decide(reserved(), claim(at_ms=END, lease_ms=5_000), PRE, END + 5_000,
                 appended_ms=END).outputs
    assert _grants(out) == [("c1", END + 10_000)]


@pytest.mark.parametrize("hold", HOLDS.values(), ids=HOLDS.keys())
def test_after_the_pre_grants_timer_the_fenced_claim_appended_before_its_end_is_granted(hold):
    """The intents topic moved the clock past the end plus the skew: the timer offered a
    plain copy (withheld under the freeze: HELD) before the fenced claim was read. The key
    keeps the end as a lease, so the claim is still its fencer's; the copy's claims come
    after it in the attempts log and are not granted attempt 1."""
    timed, out = run([ev.Timer(KEY, DUE + 60_000)], reserved(), PRE, hold)
    assert len(of(out, ev.Dispatch)) == (0 if hold else 1)
    assert (timed.phase, timed.pregrant_until_ms, timed.lease_until_ms) == (
        Phase.HELD if hold else Phase.RESERVED, 0, END)
    decision = _fenced(END - 1, DUE + 60_001, timed, hold)
    assert _grants(decision.outputs) == [("c1", END)]
    assert decision.state.phase is Phase.DISPATCHED
    _, later = run([ev.Release(KEY, FROZEN.freeze.scope), claim(claim_id="c2", at_ms=DUE + 70_000)],
                   decision.state, PRE)
    assert not _grants(later)


def test_a_plain_grant_withheld_by_a_freeze_keeps_the_pre_grants_end():
    """A first grant withheld (the claim decided as without a pre-grant) holds the key with
    the end kept as a lease: a fenced claim appended before it, read later, is granted."""
    held = decide(reserved(), claim(claim_id="c2", at_ms=END), PRE, END, FROZEN).state
    assert (held.phase, held.pregrant_until_ms, held.lease_until_ms) == (Phase.HELD, 0, END)
    decision = _fenced(END - 1, END + 10, held, FROZEN)
    assert _grants(decision.outputs) == [("c1", END)]


def test_a_later_attempt_held_by_a_freeze_keeps_no_pre_grant():
    """The fencer's ``not_applied`` within the pre-grant, under a freeze: attempt 2 is held
    with neither the pre-grant nor its end (its Dispatch would carry none)."""
    granted = _fenced(2_000, 2_000, reserved(), FROZEN).state
    state, _ = run([outcome(ev.OutcomeStatus.NOT_APPLIED, at_ms=3_000)], granted, PRE, FROZEN)
    assert (state.phase, state.attempt) == (Phase.HELD, 2)
    assert (state.pregrant_until_ms, state.lease_until_ms) == (0, 0)
    assert not _grants(_fenced(3_500, 3_500, state.changed(attempt=2), FROZEN).outputs)


def test_a_stall_copy_withheld_after_the_pre_grants_timer_keeps_its_end():
    """The pre-grant's timer offered its plain copy (the end kept as the lease); a freeze in
    hold mode came, and the stall timer's copy was withheld: the key, HELD, still keeps the
    end, so the fencer's claim appended before it and read now is granted (found by a
    hostile review: no test failed with the kept end erased there)."""
    timed, _ = run([ev.Timer(KEY, DUE)], reserved(), PRE)
    assert (timed.phase, timed.pregrant_until_ms, timed.lease_until_ms) == (
        Phase.RESERVED, 0, END)
    stall = due_ms(timed, PRE)
    assert stall > DUE
    held, out = run([ev.Timer(KEY, stall)], timed, PRE, FROZEN)
    assert not of(out, ev.Dispatch)
    assert (held.phase, held.lease_until_ms) == (Phase.HELD, END)
    decision = _fenced(END - 1, stall + 1, held, FROZEN)
    assert _grants(decision.outputs) == [("c1", END)]
    assert decision.state.phase is Phase.DISPATCHED


def test_a_record_time_after_the_clock_counts_as_the_clock():
    """Impossible from a batch (the clock is the latest time read), and never a way round
    the pre-grant: a plain claim said to be appended after the clock, read within the
    pre-grant, is held until its end."""
    out = decide(reserved(), claim(at_ms=2_000, lease_ms=5_000), PRE, 2_000,
                 appended_ms=END + 10_000).outputs
    assert not _grants(out)
    assert [(h.claim_id, h.lease_until_ms) for h in of(out, ev.Held)] == [("c1", END)]
