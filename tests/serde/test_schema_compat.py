"""The event schemas stay fully compatible with the previous release's.

``schemas/released/<version>/`` holds what each release writes; the newest one is the
baseline a rolling upgrade starts from. The checker (serde/compat.py) writes generated
records with one version and reads them with the other, both ways; the tests on small
schemas show what it accepts and what it refuses, naming the field.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from ledger_stream.serde import AvroCodec, DecodeError, SchemaSet
from ledger_stream.serde.compat import check_pair, check_release, generated_records
from ledger_stream.serde.schemas import RELEASED, SCHEMA_DIR
from tests.factories import intent


def _releases() -> list[Path]:
    return sorted((SCHEMA_DIR / RELEASED).iterdir(), key=lambda p: _version(p.name))


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("."))


def test_current_schemas_are_fully_compatible_with_the_last_release() -> None:
    last = _releases()[-1]
    problems = check_release(last, SCHEMA_DIR)
    assert not problems, (f"the schemas break a rolling upgrade from {last.name}:\n"
                          + "\n".join(map(str, problems)))


def test_the_baseline_release_is_there_and_whole() -> None:
    names = {p.stem for p in (_releases()[0]).glob("*.avsc")}
    assert {"Intent", "Receipt", "AttemptClaim", "AttemptOutcome", "Dispatch"} <= names
    assert _releases()[0].name == "0.1.0"


# -- the checker on small schemas -------------------------------------------------------------

def _record(*fields: dict[str, Any], name: str = "Pay") -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "io.test", "fields": list(fields)}


KIND = {"type": "enum", "name": "Kind", "symbols": ["card", "bank"], "default": "card"}
NOTE = {"type": "record", "name": "Note", "fields": [{"name": "text", "type": "string"}]}
BASE = _record(
    {"name": "key", "type": "string"},
    {"name": "amount", "type": "long"},
    {"name": "kind", "type": KIND},
    {"name": "note", "type": ["null", NOTE], "default": None},
)


def _with(*fields: dict[str, Any]) -> dict[str, Any]:
    return _record(*BASE["fields"], *fields)


def test_a_field_added_with_a_default_is_compatible() -> None:
    assert check_pair(BASE, _with({"name": "key_id", "type": "string", "default": ""})) == []
    assert check_pair(BASE, _with({"name": "audit", "type": ["null", "string"],
                                   "default": None})) == []


def test_a_field_added_without_a_default_is_named() -> None:
    problems = check_pair(BASE, _with({"name": "key_id", "type": "string"}))
    assert [p.where for p in problems] == ["Pay.key_id"]
    assert "without a default" in problems[0].reason


def test_a_removed_field_is_named_even_with_a_default() -> None:
    fields = [f for f in BASE["fields"] if f["name"] != "note"]
    problems = check_pair(BASE, _record(*fields))
    assert [p.where for p in problems] == ["Pay.note"]
    assert "removed" in problems[0].reason


def test_a_renamed_enum_symbol_is_named_though_avro_would_default_it() -> None:
    renamed = {**KIND, "symbols": ["card", "sepa"]}
    new = _record(*[f if f["name"] != "kind" else {**f, "type": renamed}
                    for f in BASE["fields"]])
    problems = check_pair(BASE, new)
    assert [p.where for p in problems] == ["Pay.kind"]
    assert "'bank'" in problems[0].reason


def test_an_enum_symbol_added_to_an_enum_with_a_default_is_compatible() -> None:
    added = {**KIND, "symbols": ["card", "bank", "wallet"]}
    new = _record(*[f if f["name"] != "kind" else {**f, "type": added}
                    for f in BASE["fields"]])
    assert check_pair(BASE, new) == []


def test_an_enum_symbol_added_without_an_enum_default_is_named() -> None:
    no_default = {k: v for k, v in KIND.items() if k != "default"}
    old = _record({"name": "kind", "type": no_default})
    new = _record({"name": "kind", "type": {**no_default, "symbols": ["card", "bank", "x"]}})
    problems = check_pair(old, new)
    assert [p.where for p in problems] == ["Pay.kind"]
    assert "current -> released" in problems[0].reason


def test_a_change_inside_a_union_branch_record_is_named() -> None:
    note2 = {**NOTE, "fields": [{"name": "text", "type": "string"},
                                 {"name": "by", "type": "string"}]}
    new = _record(*[f if f["name"] != "note" else {**f, "type": ["null", note2]}
                    for f in BASE["fields"]])
    problems = check_pair(BASE, new)
    assert [p.where for p in problems] == ["Pay.note"]
    assert "by" in problems[0].reason


def test_inside_a_union_branch_an_added_default_passes_and_a_removal_is_named() -> None:
    def with_note(note_fields: list[dict[str, Any]]) -> dict[str, Any]:
        note = {**NOTE, "fields": note_fields}
        return _record(*[f if f["name"] != "note" else {**f, "type": ["null", note]}
                         for f in BASE["fields"]])

    before = with_note([*NOTE["fields"], {"name": "lang", "type": "string"}])
    added = with_note([*NOTE["fields"], {"name": "lang", "type": "string"},
                       {"name": "key_id", "type": "string", "default": ""}])
    assert check_pair(before, added) == []
    problems = check_pair(before, with_note(NOTE["fields"]))
    assert [p.where for p in problems] == ["Pay.note"]
    assert "'lang'" in problems[0].reason


def test_a_field_added_inside_a_nested_record_is_named_by_its_path() -> None:
    old = _record({"name": "workflow", "type": NOTE})
    new = _record({"name": "workflow", "type": {**NOTE, "fields": [
        *NOTE["fields"], {"name": "node", "type": "string"}]}})
    problems = check_pair(old, new)
    assert [p.where for p in problems] == ["Pay.workflow.node"]


def test_a_narrowed_type_is_named() -> None:
    new = _record(*[f if f["name"] != "amount" else {**f, "type": "int"}
                    for f in BASE["fields"]])
    assert [p.where for p in check_pair(BASE, new)] == ["Pay.amount"]


def test_generated_records_cover_every_branch_and_symbol() -> None:
    records = list(generated_records(json.loads(json.dumps(BASE))))
    assert {r["kind"] for r in records} == {"card", "bank"}
    notes = [r["note"] for r in records]
    assert None in notes and any(n is not None for n in notes)


def test_check_release_names_a_removed_event_type(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "Pay.avsc").write_text(json.dumps(BASE))
    (old / "Refund.avsc").write_text(json.dumps(_record({"name": "key", "type": "string"},
                                                       name="Refund")))
    (new / "Pay.avsc").write_text(json.dumps(_with({"name": "x", "type": "string"})))
    assert sorted(p.where for p in check_release(old, new)) == ["Pay.x", "Refund"]


# -- writing a release's schemas (the first pass of a rolling upgrade) ------------------------

def _newer_schema_dir(tmp_path: Path) -> Path:
    """The current schemas plus an optional field on Intent, the released ones alongside."""
    folder = tmp_path / "schemas"
    folder.mkdir()
    for path in SCHEMA_DIR.glob("*.avsc"):
        raw = json.loads(path.read_text())
        if raw["name"] == "Intent":
            raw["fields"].append({"name": "rollout_note", "type": "string", "default": ""})
        (folder / path.name).write_text(json.dumps(raw))
    for path in (SCHEMA_DIR / RELEASED).glob("*/*.avsc"):
        (folder / RELEASED / path.parent.name).mkdir(parents=True, exist_ok=True)
        (folder / RELEASED / path.parent.name / path.name).write_text(path.read_text())
    return folder


def test_a_release_reads_what_a_newer_version_writes_only_in_its_schemas(
        tmp_path: Path) -> None:
    """Single-object frames name the writer schema by fingerprint: the released version
    knows only its own, so a newer version must write the release's schemas while both run."""
    released = AvroCodec(SchemaSet.load(_releases()[-1]))
    newer_dir = _newer_schema_dir(tmp_path)
    newer = AvroCodec(SchemaSet.load(newer_dir))
    compatible = AvroCodec(SchemaSet.load(newer_dir, write_release=_releases()[-1].name))
    event = intent()
    with pytest.raises(DecodeError, match="unknown schema fingerprint"):
        released.decode(newer.encode(event))
    assert released.decode(compatible.encode(event)) == event
    # ... and the newer version reads both (the release's schemas are known writers).
    assert newer.decode(released.encode(event)) == event
    assert newer.decode(compatible.encode(event)) == event


def test_writing_an_unknown_release_is_refused(tmp_path: Path) -> None:
    from ledger_stream.serde import SerdeError

    with pytest.raises(SerdeError, match="no released schemas '9.9.9'"):
        SchemaSet.load(SCHEMA_DIR, write_release="9.9.9")


def test_the_writer_drops_fields_the_release_does_not_have() -> None:
    """fastavro writes only the writer schema's fields: a newer record written in a release's
    schema is that release's record (the new field is not sent until the second pass)."""
    schema = fastavro.parse_schema(BASE, named_schemas={})
    buf = io.BytesIO()
    record = {"key": "k", "amount": 1, "kind": "bank", "note": None, "key_id": "x"}
    fastavro.schemaless_writer(buf, schema, record)
    buf.seek(0)
    assert "key_id" not in fastavro.schemaless_reader(buf, schema, None)
