"""A freeze scoped by workflow version (drain --hold): it holds the new intents of one
graph version (recorded, answered ``held``, no Dispatch), lets other versions pass, lets a
key already in flight under the version finish, and its unfreeze releases the keys it held
exactly once. Decided as the processor's step decides (``hold_for`` then ``decide``)."""

from __future__ import annotations

from ledger_stream.domain import absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import (
    Containment,
    command_digest,
    invalid_containment,
    release,
    take,
    version_scope,
)
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.domain.transitions import Decision
from tests.domain.decisions import POLICY
from tests.factories import claim, intent, outcome

SCOPE = version_scope("refund-agent", "2.0")


def _cmd(event_id: str, frozen: bool = True, graph: str = "refund-agent",
         version: str = "2.0") -> ev.Containment:
    return ev.Containment(event_id, 0, "", "", frozen, ev.FreezeMode.HOLD, "deploy 3.0",
                          "ops", 0, graph, version)


HELD = take(Containment(), _cmd("hold-1"), 10).containment


def _step(containment: Containment, state: KeyState, event: ev.InputEvent, now: int
          ) -> Decision:
    """The processor step's call: the workflow is given for a new intent only."""
    workflow = (event.workflow.graph, event.workflow.version) \
        if isinstance(event, ev.Intent) and not state.phase.in_flight else None
    hold = containment.hold_for(state.tenant or "acme", state.action or "refund",
                                state.key, state.held_by if state.phase is Phase.HELD
                                else "", workflow)
    return decide(state, event, POLICY, now, hold)


def _v(version: str, key: str) -> ev.Intent:
    return intent(key=key, workflow=ev.Workflow("refund-agent", version, "t", "refund"))


def test_a_new_intent_of_the_held_version_is_held_not_dispatched_nor_rejected() -> None:
    key = "acme/refund/v2-new"
    d = _step(HELD, absent(key), _v("2.0", key), 100)
    assert d.state.phase is Phase.HELD and d.state.held_by == SCOPE
    assert not [o for o in d.outputs if isinstance(o, ev.Dispatch)]
    [receipt] = [o for o in d.outputs if isinstance(o, ev.Receipt)]
    assert receipt.status is ev.ReceiptStatus.HELD


def test_an_intent_of_another_version_or_graph_passes() -> None:
    for wf in (ev.Workflow("refund-agent", "1.0"), ev.Workflow("other-agent", "2.0")):
        key = f"acme/refund/{wf.graph}-{wf.version}"
        d = _step(HELD, absent(key), intent(key=key, workflow=wf), 100)
        assert d.state.phase is Phase.RESERVED
        assert [o for o in d.outputs if isinstance(o, ev.Dispatch)]


def test_a_key_in_flight_under_the_version_finishes() -> None:
    key = "acme/refund/v2-old"
    reserved = _step(Containment(), absent(key), _v("2.0", key), 50).state  # before the hold
    granted = _step(HELD, reserved, claim(key=key, at_ms=120), 120)
    assert granted.state.phase is Phase.DISPATCHED
    assert [o for o in granted.outputs if isinstance(o, ev.Grant)]
    again = _step(HELD, granted.state, _v("2.0", key), 130)  # its retried intent: no hold
    assert again.state.phase is Phase.DISPATCHED
    retry = _step(HELD, again.state, outcome(ev.OutcomeStatus.NOT_APPLIED, key=key,
                                             at_ms=140), 140)
    assert [o.attempt for o in retry.outputs if isinstance(o, ev.Dispatch)] == [2]
    assert retry.state.phase is Phase.RESERVED


def test_the_release_dispatches_the_held_key_exactly_once() -> None:
    key = "acme/refund/v2-new"
    held = _step(HELD, absent(key), _v("2.0", key), 100)
    containment = HELD.moved(key, "", SCOPE)
    out = take(containment, _cmd("release-1", frozen=False), 200)
    assert out.released == (key,)
    assert not out.containment.freezes
    first = release(held.state, ev.Release(key, SCOPE), 200)
    assert first.state.phase is Phase.RESERVED
    assert len([o for o in first.outputs if isinstance(o, ev.Dispatch)]) == 1
    twice = release(first.state, ev.Release(key, SCOPE), 201)
    assert twice.state is first.state and not twice.outputs


def test_a_held_key_stays_held_by_its_version_freeze_on_a_duplicate_intent() -> None:
    key = "acme/refund/v2-new"
    held = _step(HELD, absent(key), _v("2.0", key), 100).state
    again = _step(HELD.moved(key, "", SCOPE), held, _v("2.0", key), 150)
    assert again.state.phase is Phase.HELD
    assert not [o for o in again.outputs if isinstance(o, ev.Dispatch)]


def test_an_action_freeze_does_not_cover_by_version_nor_the_reverse() -> None:
    assert HELD.hold_for("acme", "refund", "k", "", None) is None
    action = take(Containment(), ev.Containment("a1", 0, "refund", "", True,
                                                ev.FreezeMode.HOLD, "", "ops", 0), 1)
    hold = action.containment.hold_for("acme", "email", "k", "", ("refund-agent", "2.0"))
    assert hold is None


def test_version_freezes_are_kept_in_the_row_and_its_retry_is_a_repeat() -> None:
    again = Containment.from_row(HELD.to_row())
    assert again == HELD and again.freezes[0].scope == SCOPE
    assert take(again, _cmd("hold-1"), 20).repeat
    other = _cmd("hold-1", version="3.0")
    assert command_digest(other) != command_digest(_cmd("hold-1"))


def test_what_a_version_freeze_must_name() -> None:
    assert invalid_containment(_cmd("e")) == ""
    assert invalid_containment(_cmd("e", version="")) != ""
    assert invalid_containment(_cmd("e", graph="a/b")) != ""
    with_action = ev.Containment("e", 0, "refund", "", True, ev.FreezeMode.HOLD, "", "o", 0,
                                 "refund-agent", "2.0")
    assert invalid_containment(with_action) != ""
