"""The constructors and copies the domain writes out by hand (for the compiled core, which
builds them in native code) stay what ``@dataclass`` and ``dataclasses.replace`` would make:
every field in declaration order with its declared default, every field stored, every
field copied."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import ledger_stream.domain
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import AttemptRecord, KeyState, Phase
from ledger_stream.domain.transitions import enter
from tests.domain.changes import different as _different


def _written_out() -> list[type]:
    """Every domain dataclass whose ``__init__`` is its own, not ``@dataclass``'s."""
    found = []
    for info in pkgutil.iter_modules(ledger_stream.domain.__path__):
        module = importlib.import_module(f"ledger_stream.domain.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ \
                    and dataclasses.is_dataclass(value) \
                    and not value.__dataclass_params__.init:  # type: ignore[attr-defined]
                found.append(value)
    return found


WRITTEN_OUT = _written_out()


def _python_init(cls: type) -> Any:
    init = cls.__dict__["__init__"]
    if not inspect.isfunction(init):
        pytest.skip("compiled core: its __init__ has no Python signature (the pure one does)")
    return init


def test_the_hot_classes_write_out_their_constructors() -> None:
    names = {cls.__name__ for cls in WRITTEN_OUT}
    assert {"KeyState", "AttemptRecord", "Decision", "Intent", "Workflow", "Receipt",
            "Dispatch", "Alert", "AttemptClaim", "AttemptOutcome", "Grant"} <= names


@pytest.mark.parametrize("cls", WRITTEN_OUT, ids=lambda c: c.__name__)
def test_the_signature_is_the_fields_in_order_with_their_defaults(cls: type) -> None:
    params = list(inspect.signature(_python_init(cls)).parameters.values())[1:]
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, f.name
        assert p.annotation == cls.__annotations__[f.name], f.name
        if f.default is not dataclasses.MISSING:
            assert p.default is f.default or (p.default == f.default
                                              and type(p.default) is type(f.default)), f.name
        elif f.default_factory is not dataclasses.MISSING:
            assert p.default == f.default_factory(), f.name
        else:
            assert p.default is inspect.Parameter.empty, f.name


@pytest.mark.parametrize("cls", WRITTEN_OUT, ids=lambda c: c.__name__)
def test_every_argument_lands_in_its_own_field(cls: type) -> None:
    _python_init(cls)  # the pure core checks no types: a distinct object per field
    fields = dataclasses.fields(cls)
    given = [object() for _ in fields]
    made = cls(*given)
    assert [getattr(made, f.name) for f in fields] == given
    by_name = cls(**{f.name: v for f, v in zip(fields, given, strict=True)})
    assert [getattr(by_name, f.name) for f in fields] == given


STATE = KeyState(
    key="acme/refund/r-1", phase=Phase.DISPATCHED, intent_event_id="e-1", tenant="acme",
    action="refund", target="sandbox", args_hash="h", args_json='{"a":1}',
    payload_json='{"p":2}', graph="g", version="1", attempt=2, granted_claim_id="c-2",
    lease_until_ms=3, not_before_ms=4, external_id="x", status_detail="d",
    reserved_at_ms=5, terminal_at_ms=6, duplicate_effects=7,
    history=(AttemptRecord(1, "c-1", "granted", 5),), phase_since_ms=8, unknown_attempts=9,
    lapses=10, settled_by="s", stall_alerted=11, sealed_outcome="o", held_by="f",
    sent_at_ms=12, pregrant_until_ms=13)


def test_the_sample_state_sets_every_field() -> None:
    blank = KeyState(key="")
    assert all(getattr(STATE, f.name) != getattr(blank, f.name)
               for f in dataclasses.fields(KeyState))


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(KeyState)])
def test_a_state_changed_in_one_field_is_dataclasses_replace(name: str) -> None:
    new = _different(getattr(STATE, name))
    changed = STATE.changed(**{name: new})
    assert changed == dataclasses.replace(STATE, **{name: new})
    assert getattr(changed, name) == new
    assert all(getattr(changed, f.name) == getattr(STATE, f.name)
               for f in dataclasses.fields(KeyState) if f.name != name)


def test_a_state_changed_in_nothing_is_an_equal_copy_and_unknown_names_raise() -> None:
    copied = STATE.changed()
    assert copied == STATE and copied is not STATE
    with pytest.raises(TypeError, match="colour"):
        STATE.changed(colour="red")  # type: ignore[call-arg]


def test_a_receipt_with_an_origin_is_dataclasses_replace() -> None:
    receipt = ev.Receipt("r", "k", "e", ev.ReceiptStatus.SUCCEEDED, ev.Reason.OPERATOR, "h",
                         3, 4, "x", "d", ev.ReceiptStatus.FAILED, "fresh", "e-0")
    blank = ev.Receipt("", "", "", ev.ReceiptStatus.ACCEPTED, ev.Reason.NONE, "", 0, 0)
    assert all(getattr(receipt, f.name) != getattr(blank, f.name)
               for f in dataclasses.fields(ev.Receipt))
    assert receipt.with_origin("fork") == dataclasses.replace(receipt, origin="fork")


def test_a_row_holds_every_field_in_order() -> None:
    expected = [getattr(STATE, f.name) for f in dataclasses.fields(KeyState)]
    expected[1] = "dispatched"
    expected[20] = [[1, "c-1", "granted", 5, ""]]
    row = STATE.to_row()
    assert row == expected
    assert type(row[1]) is str
    assert KeyState.from_row(row) == STATE


@pytest.mark.parametrize("phase", [Phase.DISPATCHED, Phase.SUCCEEDED, Phase.FAILED])
@pytest.mark.parametrize("record", [None, AttemptRecord(3, "c-3", "granted", 40)])
def test_entering_a_phase_with_changes_or_after_them_is_one_state(
        phase: Phase, record: AttemptRecord | None) -> None:
    """``enter``'s keywords (kept for its other callers) and the decision table's way (the
    fields set first with ``changed``) give the same state: phase, its time, a terminal
    time for a terminal phase (over any given), the record appended, the fields set."""
    given = {"status_detail": "why", "terminal_at_ms": 1, "attempt": 4}
    by_keywords = enter(STATE, phase, 50, record, **given)
    assert by_keywords == enter(STATE.changed(**given), phase, 50, record)
    assert (by_keywords.phase, by_keywords.phase_since_ms) == (phase, 50)
    assert by_keywords.terminal_at_ms == (50 if phase.terminal else 1)
    assert by_keywords.history == (*STATE.history, *([record] if record else []))
    assert (by_keywords.status_detail, by_keywords.attempt) == ("why", 4)
