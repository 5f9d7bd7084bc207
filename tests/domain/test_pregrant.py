"""The pre-granted first attempt (docs/protocol.md, "The pre-granted first attempt"): an
exactly-once processor's first Dispatch of a key carries a lease for the connector that
fences its record; a fenced claim within it is granted under that lease, a plain claim
waits for its end, and no other Dispatch ever carries a pre-grant."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_stream.domain import decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Freeze, Hold
from ledger_stream.domain.state import KeyState, Phase
from tests.domain.decisions import POLICY, of, run
from tests.factories import KEY, claim, intent, outcome, reconciled, resolution

pytestmark = pytest.mark.timeout(30)

OS, RS, RES = ev.OutcomeStatus, ev.ReconcileStatus, ev.Resolution
LEASE = 30_000
PRE = replace(POLICY, pregrant_lease_ms=LEASE)
AT = 1_000  # the intent's partition time (tests.factories.intent)
END = AT + LEASE  # the pre-grant's end
FROZEN = Hold(Freeze("", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f-1", 500))


def reserved() -> KeyState:
    state, _ = run([intent(at_ms=AT)], policy=PRE)
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
    assert state.pregrant_until_ms == 0
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


def test_the_stall_timers_copy_carries_no_pre_grant():
    before, out = run([intent(at_ms=AT)], policy=PRE)
    (first,) = of(out, ev.Dispatch)
    state, out = run([ev.Timer(KEY, AT + PRE.stall_after_ms)], before, PRE)
    (copy,) = of(out, ev.Dispatch)
    assert copy.dispatch_id == first.dispatch_id  # the same Dispatch, offered again
    assert (first.lease_until_ms, copy.lease_until_ms) == (END, 0)
    # The pre-grant itself still stands until its end (only the copy carries none).
    assert state.pregrant_until_ms == END


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
