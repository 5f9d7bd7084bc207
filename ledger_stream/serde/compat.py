"""Full compatibility of two versions of the event schemas, proven with data.

During a rolling upgrade processes of the previous release and of this one read each
other's events, so each current schema must read what the released one wrote and the
released one must read what the current one writes. ``check_release`` checks that for every
event type by writing generated records with one schema and reading them with the other
(fastavro's schema resolution, the same the codec uses), both ways. The generated records
cover every field, every union branch and every enum symbol.

Beyond what Avro resolution alone accepts, the ledger's rules also fail:

- a field of the released schema that the current one no longer has (never remove a
  field: an old reader may still need it, and its meaning is lost);
- a value of the released version that does not come back as written in a field both
  versions have (an enum symbol renamed or dropped resolves to the enum's default without
  an error: a silent change). A symbol added to an enum that has a default is compatible:
  the release reads it as that default, as the enum's default is declared for.

Every problem names the event type and the field path (``Intent.workflow.node``).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import expand_schema

from ledger_stream.serde.schemas import SchemaSet


@dataclass(frozen=True)
class Incompatibility:
    """One field that breaks a rolling upgrade: ``where`` is ``Event.field.path``."""

    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


def check_release(released: Path, current: Path) -> list[Incompatibility]:
    """Every incompatibility between the schemas of the ``released`` folder and of the
    ``current`` one (an event type the current version dropped counts as one)."""
    old, new = SchemaSet.load(released), SchemaSet.load(current)
    problems: list[Incompatibility] = []
    for name in old.names():
        if name not in new.names():
            problems.append(Incompatibility(name, "event type removed"))
            continue
        problems += check_pair(old.current(name).raw, new.current(name).raw)
    return problems


def check_pair(old: dict[str, Any], new: dict[str, Any]) -> list[Incompatibility]:
    """The incompatibilities between an ``old`` and a ``new`` version of one record schema,
    in both directions; empty when each reads the other's data with every value intact."""
    old_x, new_x = _expanded(old), _expanded(new)
    name = str(old["name"]).rsplit(".", 1)[-1]
    problems = _record_problems(old_x, new_x, name)
    if not problems:  # the whole record, as the codec resolves it, both ways
        problems += _round_trip(old, new, name, "released -> current", values=old_x)
        problems += _round_trip(new, old, name, "current -> released", values=new_x)
    return problems


def _expanded(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every named type written out where it is used, so that each field's
    type stands alone (named references resolved)."""
    expanded = expand_schema(schema)
    assert isinstance(expanded, dict)  # a record schema expands to a record schema
    return expanded


def _record_problems(old: dict[str, Any], new: dict[str, Any],
                     path: str) -> list[Incompatibility]:
    old_fields = {f["name"]: f for f in old["fields"]}
    new_fields = {f["name"]: f for f in new["fields"]}
    problems = [Incompatibility(f"{path}.{n}", "field removed (fields are never removed)")
                for n in old_fields if n not in new_fields]
    for fname, field in new_fields.items():
        where = f"{path}.{fname}"
        if fname not in old_fields:
            if "default" not in field:
                problems.append(Incompatibility(
                    where, "field added without a default: the current version cannot read "
                           "events the released one wrote"))
            continue
        before = old_fields[fname]
        if _is_record(before["type"]) and _is_record(field["type"]):
            nested = _record_problems(before["type"], field["type"], where)
            if nested:
                problems += nested
                continue
        problems += _field_round_trip(before, field, where)
    return problems


def _is_record(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "record"


def _field_round_trip(old: dict[str, Any], new: dict[str, Any],
                      where: str) -> list[Incompatibility]:
    """One field both versions have, alone in a record: written by each, read by the other,
    every generated value must come back unchanged."""
    def alone(field: dict[str, Any]) -> dict[str, Any]:
        return {"type": "record", "name": "Field", "fields": [field]}

    found = _round_trip(alone(old), alone(new), where, "released -> current", nested=False)
    return found or _round_trip(alone(new), alone(old), where, "current -> released",
                                nested=False)


def _round_trip(writer: dict[str, Any], reader: dict[str, Any], where: str,
                direction: str, nested: bool = True,
                values: dict[str, Any] | None = None) -> list[Incompatibility]:
    """Write every generated record of ``writer`` (generated from ``values``, the writer
    expanded, when it uses named references), read it with ``reader``: each field the
    reader shares with the writer must come back as written."""
    try:
        w_parsed = fastavro.parse_schema(writer, named_schemas={})
        r_parsed = fastavro.parse_schema(reader, named_schemas={})
    except Exception as exc:  # fastavro raises several unrelated types
        return [Incompatibility(where, f"schema does not parse: {exc}")]
    shared = {f["name"] for f in reader["fields"]} & {f["name"] for f in writer["fields"]}
    for datum in generated_records(values or writer):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, w_parsed, datum)
        buf.seek(0)
        try:
            read = fastavro.schemaless_reader(buf, w_parsed, r_parsed)
        except Exception as exc:  # SchemaResolutionError, or a type error deeper down
            return [Incompatibility(where, f"{direction}: cannot read: {exc}")]
        assert isinstance(read, dict)
        for fname in sorted(shared):
            if not _came_back(_plain(datum[fname]), read.get(fname),
                              dropping_ok=direction.startswith("current")):
                field = where if not nested else f"{where}.{fname}"
                return [Incompatibility(field, f"{direction}: wrote {_plain(datum[fname])!r}, "
                                               f"read {read.get(fname)!r}")]
    return []


def generated_records(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Records of an expanded record schema that together give every field a value, and
    take every union branch and every enum symbol somewhere."""
    count = _variants(schema)
    for i in range(count):
        value = _value(schema, i)
        assert isinstance(value, dict)
        yield value


def _variants(schema: Any) -> int:
    """How many records it takes to cover every branch and symbol of ``schema``."""
    if isinstance(schema, list):
        return sum(_variants(branch) for branch in schema)
    if isinstance(schema, dict):
        kind = schema["type"]
        if kind == "record":
            return max([1, *(_variants(f["type"]) for f in schema["fields"])])
        if kind == "enum":
            return len(schema["symbols"])
        if kind == "array":
            return _variants(schema["items"])
        if kind == "map":
            return _variants(schema["values"])
        if isinstance(kind, list | dict):
            return _variants(kind)
    return 1


_PRIMITIVES: dict[str, Any] = {
    "null": None, "boolean": True, "int": 7, "long": 1 << 40, "float": 1.5,
    "double": 2.25, "bytes": b"\x00b", "string": "s-",
}


def _value(schema: Any, i: int) -> Any:
    """The ``i``-th generated value of ``schema`` (variants cycle)."""
    if isinstance(schema, list):
        for branch in schema:
            n = _variants(branch)
            if i % _variants(schema) < n:
                value = _value(branch, i % _variants(schema))
                return (branch["name"], value) if _is_named(branch) else value
            i -= n
        raise AssertionError("unreachable: i indexes a branch")
    if isinstance(schema, str):
        value = _PRIMITIVES[schema]
        return f"{value}{i}" if schema == "string" else value
    kind = schema["type"]
    if kind == "record":
        return {f["name"]: _value(f["type"], i % _variants(f["type"]))
                for f in schema["fields"]}
    if kind == "enum":
        return schema["symbols"][i % len(schema["symbols"])]
    if kind == "array":
        return [_value(schema["items"], i)]
    if kind == "map":
        return {"k": _value(schema["values"], i)}
    if kind == "fixed":
        return b"\x01" * int(schema["size"])
    return _value(kind, i)


def _came_back(written: Any, read: Any, dropping_ok: bool) -> bool:
    """Whether ``read`` is ``written`` as the other version sees it: equal, except that a
    nested record (in a union branch, say) may gain the reader's added fields (defaults)
    and, read by the released version, lose the fields the current one added and read a
    symbol added to an enum with a default as that default."""
    if isinstance(written, dict) and isinstance(read, dict):
        if not dropping_ok and not set(written) <= set(read):
            return False
        return all(_came_back(v, read[k], dropping_ok) for k, v in written.items()
                   if k in read)
    if isinstance(written, list) and isinstance(read, list):
        return len(written) == len(read) and all(
            _came_back(w, r, dropping_ok) for w, r in zip(written, read, strict=True))
    if dropping_ok and isinstance(written, str) and isinstance(read, str):
        # Resolution changes a string only where an enum symbol the release lacks reads
        # as the release enum's declared default: the fallback that enum was given for it.
        return True
    return bool(written == read)


def _plain(value: Any) -> Any:
    """``value`` as a reader returns it: a union's ``(branch name, value)`` is the value."""
    if isinstance(value, tuple):
        return _plain(value[1])
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _is_named(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") in ("record", "enum", "fixed")
