"""The compiled converters (serde/records.py) against a reference written independently of
them: for one event of each type, the dict is what walking the dataclass field by field
gives, and the dict converts back to an equal event; a record without a field (a reader
schema older than the class) keeps the field's default, also in a nested record."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.serde.records import from_record, to_record
from tests.factories import KEY, intent
from tests.serde.events import one_of_each

pytestmark = pytest.mark.timeout(30)


def reference(value: Any) -> Any:
    """A dataclass as nested dicts, enums as their values, tuples as lists, everything else
    as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: reference(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):  # a tuple of records travels as a list
        return [reference(v) for v in value]
    return value


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: type(e).__name__)
def test_each_event_converts_as_the_reference_and_back(event: Any) -> None:
    record = to_record(event)
    assert record == reference(event)
    assert list(record) == [f.name for f in dataclasses.fields(event)]
    assert from_record(type(event), record) == event


def test_a_missing_field_keeps_its_default_at_the_top_and_nested() -> None:
    event = intent(payload_json="{}")
    record = to_record(event)
    del record["payload_json"]
    assert from_record(ev.Intent, record) == dataclasses.replace(event, payload_json="")

    nested = to_record(event)
    workflow = dict(nested["workflow"])
    dropped = next(f for f in dataclasses.fields(ev.Workflow)
                   if f.default is not dataclasses.MISSING)
    del workflow[dropped.name]
    nested["workflow"] = workflow
    back = from_record(ev.Intent, nested)
    assert getattr(back.workflow, dropped.name) == dropped.default
    assert back.key == KEY


def test_a_wrong_enum_symbol_raises_value_error_as_before() -> None:
    record = to_record(ev.Alert("a", KEY, ev.AlertKind.DUPLICATE_EFFECT, "s", "d", 3))
    record["kind"] = "no_such_kind"
    with pytest.raises(ValueError):
        from_record(ev.Alert, record)


def test_an_enum_decodes_to_its_member_itself() -> None:
    record = to_record(ev.Alert("a", KEY, ev.AlertKind.DUPLICATE_EFFECT, "s", "d", 3))
    assert from_record(ev.Alert, record).kind is ev.AlertKind.DUPLICATE_EFFECT
    assert type(record["kind"]) is str


@dataclasses.dataclass(frozen=True)
class _KeywordOnly:
    """A class whose constructor takes a field by keyword only: decoded by keyword (the
    domain's classes are decoded positionally, in field order)."""

    a: str
    b: int = dataclasses.field(default=0, kw_only=True)
    c: str = ""


def test_a_keyword_only_field_is_decoded_by_keyword() -> None:
    made = _KeywordOnly("x", b=2, c="y")
    assert from_record(_KeywordOnly, to_record(made)) == made
