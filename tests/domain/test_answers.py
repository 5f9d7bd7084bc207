"""What one request got (``Receipt.answer_to``), beside the key's state, on the pure core:
the intent that made the effect reads ``created``, any other ``already_done``, a refusal
``rejected`` without the held arguments' hash, a freeze ``held``, a key in flight
``pending``."""

from __future__ import annotations

import pytest

from ledger_stream.domain import Policy, absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Freeze, Hold
from ledger_stream.domain.state import KeyState
from ledger_stream.domain.values import replace
from tests.factories import KEY, claim, intent, now_of, outcome

pytestmark = pytest.mark.timeout(30)

A = ev.Answer
POLICY = Policy()


def receipts(events: list[ev.InputEvent], hold: Hold | None = None
             ) -> tuple[KeyState, list[ev.Receipt]]:
    state, found = absent(KEY), []
    for event in events:
        decision = decide(state, event, POLICY, now_of(event), hold)
        state = decision.state
        found += [o for o in decision.outputs if isinstance(o, ev.Receipt)]
    return state, found


def test_the_intent_that_made_the_effect_is_created_a_repeat_already_done():
    first, repeat = intent(), intent(at_ms=9_000)
    _, found = receipts([first, claim(), outcome(ev.OutcomeStatus.SUCCEEDED, at_ms=3_000,
                                                 external_id="re_1"), repeat])
    accepted, settled, again = found[0], found[-2], found[-1]
    assert accepted.answer is A.PENDING and accepted.effect_intent_id == first.event_id
    assert (settled.state, settled.answer) == (ev.ReceiptStatus.SUCCEEDED, A.CREATED)
    assert (again.intent_event_id, again.state, again.answer) == (
        repeat.event_id, ev.ReceiptStatus.SUCCEEDED, A.ALREADY_DONE)
    assert again.effect_intent_id == first.event_id and again.external_id == "re_1"
    # The key's change, read as the answer to the repeat (as a submit that waited does).
    assert settled.answer_to(repeat.event_id) is A.ALREADY_DONE


def test_a_conflict_is_rejected_and_names_no_held_argument():
    first, other = intent(), intent(args={"amount": 999, "to": "cust-1"}, at_ms=2_500)
    _, found = receipts([first, claim(), outcome(ev.OutcomeStatus.SUCCEEDED, at_ms=3_000),
                         other])
    conflict = found[-1]
    assert (conflict.status, conflict.reason, conflict.answer) == (
        ev.ReceiptStatus.REJECTED, ev.Reason.CONFLICT, A.REJECTED)
    assert conflict.state is ev.ReceiptStatus.SUCCEEDED  # the key is untouched
    assert conflict.args_hash == other.args_hash
    assert first.args_hash not in repr(conflict)


def test_a_frozen_action_is_held_and_a_failed_effect_is_its_intents():
    freeze = Freeze("", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f1", 1)
    _, (held,) = receipts([intent()], Hold(freeze, room=True))
    assert (held.state, held.answer, held.reason) == (
        ev.ReceiptStatus.HELD, A.HELD, ev.Reason.FROZEN)
    first = intent()
    _, found = receipts([first, claim(), outcome(ev.OutcomeStatus.FAILED, at_ms=3_000)])
    assert (found[-1].state, found[-1].answer) == (ev.ReceiptStatus.FAILED, A.CREATED)


def test_a_receipt_written_before_effect_intent_id_never_reads_created():
    first = intent()
    _, found = receipts([first, claim(), outcome(ev.OutcomeStatus.SUCCEEDED, at_ms=3_000)])
    old = replace(found[-1], effect_intent_id="")
    assert old.answer is A.ALREADY_DONE
