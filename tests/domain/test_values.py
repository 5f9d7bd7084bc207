"""``values.replace`` does what ``dataclasses.replace`` does, for every value class of the
domain: same result for any subset of fields changed, TypeError for a name that is not a
field."""

from __future__ import annotations

import dataclasses

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Containment
from ledger_stream.domain.state import AttemptRecord, KeyState, Phase
from ledger_stream.domain.values import replace
from tests.domain.changes import different as _different
from tests.serde.events import one_of_each

STATE = KeyState(key="acme/refund/r-1", phase=Phase.DISPATCHED, attempt=2,
                 history=(AttemptRecord(1, "c-1", "granted", 5),), args_json='{"a":1}')


def _values() -> list[object]:
    return [STATE, AttemptRecord(1, "c-1", "granted", 5), Containment(), *one_of_each()]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_each_field_changed_alone_and_all_together_match_dataclasses_replace(
        value: object) -> None:
    fields = dataclasses.fields(value)  # type: ignore[arg-type]
    # A change per field: a different value of the field's own type.
    everything = {}
    for f in fields:
        new = _different(getattr(value, f.name))
        assert new != getattr(value, f.name), f.name
        try:
            expected = dataclasses.replace(value, **{f.name: new})  # type: ignore[type-var]
        except TypeError:  # the compiled core's classes refuse a value outside the type
            with pytest.raises(TypeError):
                replace(value, **{f.name: new})
            continue
        assert replace(value, **{f.name: new}) == expected
        everything[f.name] = new
    assert replace(value, **everything) == dataclasses.replace(value, **everything)  # type: ignore[type-var]
    copied = replace(value)
    assert copied == value and copied is not value


def test_a_changed_field_is_changed_and_the_others_kept() -> None:
    moved = replace(STATE, phase=Phase.SUCCEEDED, terminal_at_ms=9)
    assert (moved.phase, moved.terminal_at_ms) == (Phase.SUCCEEDED, 9)
    assert moved.history == STATE.history and moved.args_json == STATE.args_json
    assert STATE.phase is Phase.DISPATCHED  # frozen: the original is untouched


def test_a_name_that_is_not_a_field_raises_type_error() -> None:
    with pytest.raises(TypeError, match="KeyState has no field colour"):
        replace(STATE, colour="red")
    with pytest.raises(TypeError):
        dataclasses.replace(STATE, colour="red")  # type: ignore[call-arg]


def test_receipts_keep_their_type() -> None:
    receipt = next(e for e in one_of_each() if isinstance(e, ev.Receipt))
    assert type(replace(receipt, origin="resume")) is ev.Receipt
