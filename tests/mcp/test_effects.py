"""Effect registrations for ``ledger-stream mcp``: the key comes from the argument fields an
effect names, a model-written id only where a registration opts in, and a registration with
neither is refused with the way out."""

from __future__ import annotations

from typing import Any

import pytest

from ledger_stream.domain.keys import InvalidKeyError
from ledger_stream.mcp.effects import EffectSpecError, parse_effects


def test_registrations_name_their_key_fields() -> None:
    parsed = parse_effects(" refund=refund@payments[invoice] , ship=ship@warehouse[ order , line ],"
                           "note=add_note@crm[unsafe-model-id]")
    assert {n: (e.action, e.target, e.key_fields, e.model_id) for n, e in parsed.items()} == {
        "refund": ("refund", "payments", ("invoice",), False),
        "ship": ("ship", "warehouse", ("order", "line"), False),
        "note": ("add_note", "crm", (), True)}


def test_a_registration_without_a_business_id_is_refused_with_the_way_out() -> None:
    for old in ("refund=refund@payments", "refund=refund@payments[]",
                "refund=refund@payments[ , ]"):
        with pytest.raises(EffectSpecError) as refused:
            parse_effects(old)
        message = str(refused.value)
        assert "effect 'refund' names no business id" in message
        assert "refund=refund@payments[FIELD,...]" in message
        assert "refund=refund@payments[unsafe-model-id]" in message and "unsafe" in message


@pytest.mark.parametrize("bad,why", [
    ("refund", "is not NAME=ACTION@TARGET[FIELD,...]"),
    ("a=b@c[x],a=d@e[x]", "registered twice"),
    ("", "no effects registered"),
    ("r=re/fund@p[x]", "bad action"),
    ("r=r@p[invoice,unsafe-model-id]", "unsafe-model-id stands alone"),
    ("r=r@p[in voice]", "key fields must be distinct argument names"),
    ("r=r@p[a,a]", "key fields must be distinct argument names"),
    ("r=r@p[a", "cannot read the effects"),
    ("r=r@p[a]x", "cannot read the effects"),
    ("refund=refund@payments[i],refund_eu=refund@payments-eu[i]", "share the action"),
    ("r=r@[x]", "is not NAME=ACTION@TARGET"),
    ("=r@p[x]", "is not NAME=ACTION@TARGET"),
    ("r=@p[x]", "is not NAME=ACTION@TARGET"),
    ("r=r@p[x],[y]", "is not NAME=ACTION@TARGET"),
])
def test_bad_registrations_are_refused_with_the_reason(bad: str, why: str) -> None:
    with pytest.raises(EffectSpecError, match=why.replace("[", r"\[").replace(".", r"\.")):
        parse_effects(bad)


def test_the_key_is_the_named_fields_values_and_nothing_the_model_writes_about_the_call(
        ) -> None:
    ship = parse_effects("ship=ship@warehouse[order,line]")["ship"]
    args: dict[str, Any] = {"order": " o-7 ", "line": 2, "qty": 1}
    assert ship.key("acme", args) == "acme/ship/o-7/2"
    # An operation_id the model sends anyway never chooses the key.
    assert ship.key("acme", args, "attempt-1") == ship.key("acme", args, "retry-2") == \
        "acme/ship/o-7/2"
    assert ship.business_id("acme/ship/o-7/2") == {"order": "o-7", "line": "2"}
    assert ship.business_id("acme/ship/other-shape") == {}


def test_one_business_id_written_differently_is_one_key() -> None:
    """42 and "42", whitespace, and an accent composed or decomposed: one key (a regenerated
    answer may write either)."""
    refund = parse_effects("refund=refund@payments[invoice]")["refund"]
    assert {refund.key("acme", {"invoice": v}) for v in (42, "42", " 42 ")} == {"acme/refund/42"}
    assert refund.key("acme", {"invoice": "caf\u00e9-1"}) == \
        refund.key("acme", {"invoice": "cafe\u0301-1"}) == "acme/refund/caf\u00e9-1"
    note = parse_effects("note=add_note@crm[unsafe-model-id]")["note"]
    assert note.key("acme", {}, "cafe\u0301-1") == "acme/add_note/caf\u00e9-1"


@pytest.mark.parametrize("args", [{}, {"invoice": ""}, {"invoice": "  "}, {"invoice": None},
                                  {"invoice": 1.5}, {"invoice": True}, {"invoice": {"id": 1}},
                                  {"invoice": "a/b"}])
def test_an_unusable_business_id_is_refused(args: dict[str, Any]) -> None:
    refund = parse_effects("refund=refund@payments[invoice]")["refund"]
    with pytest.raises(InvalidKeyError):
        refund.key("acme", args)


def test_an_opted_in_effect_takes_the_model_id_and_needs_one() -> None:
    note = parse_effects("note=add_note@crm[unsafe-model-id]")["note"]
    assert note.key("acme", {"text": "hi"}, " n-1 ") == "acme/add_note/n-1"
    assert note.business_id("acme/add_note/n-1") == {"operation_id": "n-1"}
    for missing in (None, "", " "):
        with pytest.raises(InvalidKeyError, match="takes its key from operation_id"):
            note.key("acme", {"text": "hi"}, missing)
