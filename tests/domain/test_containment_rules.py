"""The freeze rules have one home: ``take`` decides what a partition does with a command
(repeat, refused, applied) and ``refused_on_read`` what it refuses before deciding; the
processor's step and the operator's ``freezes`` listing both call them."""

from __future__ import annotations

import inspect

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import (
    FREEZE_LIMIT,
    Containment,
    command_key,
    refused_on_read,
    take,
)
from ledger_stream.operate import containment as operate
from ledger_stream.processor import step

KEY = command_key("e1", "0" * 32)


def _cmd(event_id: str, action: str, frozen: bool = True, partition: int = 0) -> ev.Containment:
    return ev.Containment(event_id, partition, action, "acme", frozen, ev.FreezeMode.HOLD,
                          "", "ops", 0)


def test_a_command_applies_then_its_retry_is_a_repeat() -> None:
    first = take(Containment(), _cmd("e1", "refund"), 10)
    assert not first.repeat and not first.refused
    assert [f.action for f in first.containment.freezes] == ["refund"]
    again = take(first.containment, _cmd("e1", "refund"), 20)
    assert again.repeat and again.containment is first.containment


def test_a_new_scope_past_the_limit_is_refused_and_changes_nothing() -> None:
    held = Containment()
    for n in range(FREEZE_LIMIT):
        held = take(held, _cmd(f"e{n}", f"a{n}"), n).containment
    past = take(held, _cmd("late", "another"), 99)
    assert past.refused == f"a Containment past {FREEZE_LIMIT} frozen scopes"
    assert past.containment is held


def test_an_unfreeze_releases_the_keys_its_freeze_holds_in_order() -> None:
    held = take(Containment(), _cmd("e1", "refund"), 1).containment
    held = held.moved("acme/refund/k1", "", "acme/refund").moved("acme/refund/k2", "",
                                                               "acme/refund")
    out = take(held, _cmd("e2", "refund", frozen=False), 2)
    assert out.released == ("acme/refund/k1", "acme/refund/k2")


def test_what_is_refused_before_deciding() -> None:
    assert refused_on_read(_cmd("e1", "refund"), KEY, 0) == ""
    assert refused_on_read(_cmd("e1", "refund", partition=1), KEY, 0) == \
        "Containment for partition 1 read from 0"
    assert refused_on_read(_cmd("e1", "a/b"), KEY, 0).startswith("invalid Containment: ")
    assert refused_on_read(_cmd("e1", "refund"), b"other", 0) == \
        "Containment keyed outside ~containment/"
    assert refused_on_read(_cmd("e1", "refund"), b"~containment/\xff", 0) == \
        "message key is not UTF-8"


def test_the_step_and_the_operator_listing_call_the_one_rule() -> None:
    for module in (step, operate):
        source = inspect.getsource(module)
        assert "refused_on_read(" in source, module.__name__
        assert "take(" in source or "contain_command(" in source, module.__name__
        assert ".repeats(" not in source and ".refusal(" not in source, module.__name__
