"""Conversion between the domain's frozen dataclasses and Avro-ready dicts.

Converters are built once per class from its type hints: enums travel as their symbol,
nested dataclasses as dicts, optional nested dataclasses as dict or None, a tuple of
dataclasses as a list of dicts. Each class's pair
is compiled into two straight-line functions (as ``dataclasses`` compiles ``__init__``): a
dict display to encode, one constructor call to decode, with no per-field loop, ``getattr``
or converter call where a field needs no conversion. Every record the processor reads or
writes goes through them, so they are on its hot path: the constructor is called with
positional arguments (in field order, which is ``__init__``'s: the compiled core's classes
parse them faster than keywords), an enum is read as ``member._value_`` (the value
without the ``value`` property's Python-level descriptor) and made from its value by a
lookup in a map of its members (an unknown value raises as the enum's own call does).
"""

from __future__ import annotations

import ast
import dataclasses
import sys
import types
import typing
from collections.abc import Callable
from enum import Enum
from functools import cache
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

Encoder = Callable[[Any], dict[str, Any]]
Decoder = Callable[[dict[str, Any]], Any]


@dataclasses.dataclass(frozen=True)
class _Field:
    """How one field converts: ``kind`` is plain, enum, record, optional (record) or
    records (a tuple of them)."""

    name: str
    kind: str
    type: Any = None


def _field(name: str, hint: Any) -> _Field:
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _Field(name, "enum", hint)
    if dataclasses.is_dataclass(hint):
        return _Field(name, "record", hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) == 1 and dataclasses.is_dataclass(members[0]):
            return _Field(name, "optional", members[0])
    items = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(items) == 2 and items[1] is Ellipsis \
            and dataclasses.is_dataclass(items[0]):
        return _Field(name, "records", items[0])
    return _Field(name, "plain")


@cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = _hints(cls)
    return tuple(_field(f.name, hints[f.name]) for f in dataclasses.fields(cls))


def _hints(cls: type) -> dict[str, Any]:
    """``cls``'s field types. A class mypyc compiled (the compiled decision core) keeps only
    erased annotations (``tuple`` for ``tuple[Observation, ...]``), so its hints are read
    from its module's source, which ships beside the compiled module, and evaluated in
    that module: the same types the pure class declares."""
    module = sys.modules[cls.__module__]
    compiled = str(getattr(module, "__file__", "") or "")
    if not compiled.endswith(tuple(EXTENSION_SUFFIXES)):
        return typing.get_type_hints(cls)
    package, _, stem = cls.__module__.rpartition(".")
    source = Path(next(iter(sys.modules[package].__path__))) / f"{stem}.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    body = next(node.body for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef) and node.name == cls.__qualname__)
    return {item.target.id: eval(ast.unparse(item.annotation), vars(module))  # noqa: S307
            for item in body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}


class _Members(dict[Any, Enum]):
    """An enum's members by value: ``members[value]`` is ``enum(value)``, one dict lookup
    instead of the enum's Python-level call (which a value not in the map still goes to,
    to raise its own error)."""

    def __init__(self, enum: type[Enum]) -> None:
        super().__init__((member.value, member) for member in enum)
        self.enum = enum

    def __missing__(self, value: Any) -> Enum:
        return self.enum(value)


def _compile(source: str, scope: dict[str, Any], name: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<ledger_stream.serde.records {name}>", "exec"), scope, namespace)
    return namespace[name]


def _expression(f: _Field, i: int, raw: str, convert: Callable[[type], Any], prefix: str,
                scope: dict[str, Any]) -> str:
    """The source converting field ``f`` (number ``i``) whose value is ``raw``; a nested
    record's converter (``convert`` of its type) goes into ``scope`` as ``<prefix><i>``."""
    if f.kind == "records":  # a list on the wire, a tuple in the (frozen) event
        scope[f"{prefix}{i}"] = convert(f.type)
        items = f"[{prefix}{i}(x) for x in {raw}]"
        return items if prefix == "e" else f"tuple({items})"
    if f.kind in ("record", "optional"):
        scope[f"{prefix}{i}"] = convert(f.type)
        call = f"{prefix}{i}({raw})"
        return call if f.kind == "record" else f"(None if {raw} is None else {call})"
    return raw


@cache
def encoder(cls: type) -> Encoder:
    """``cls``'s instance → Avro-ready dict, compiled once."""
    scope: dict[str, Any] = {}
    items = []
    for i, f in enumerate(_fields(cls)):
        raw = f"o.{f.name}._value_" if f.kind == "enum" else f"o.{f.name}"
        items.append(f"{f.name!r}: {_expression(f, i, raw, encoder, 'e', scope)}")
    source = f"def encode(o):\n    return {{{', '.join(items)}}}\n"
    return typing.cast(Encoder, _compile(source, scope, "encode"))


@cache
def decoder(cls: type) -> Decoder:
    """Avro dict → ``cls``, compiled once. A record missing a field (a schema older than
    the class) leaves that field at its default, as the general path below does."""
    scope: dict[str, Any] = {"cls": cls, "slow": lambda r: _decode_present(cls, r)}
    # Positional (field order is __init__'s), unless a field is keyword-only.
    keywords = any(f.kw_only for f in dataclasses.fields(cls))
    args = []
    for i, f in enumerate(_fields(cls)):
        raw = f"r[{f.name!r}]"
        if f.kind == "enum":
            scope[f"t{i}"] = _Members(f.type)
            raw = f"t{i}[{raw}]"
        value = _expression(f, i, raw, decoder, "d", scope)
        args.append(f"{f.name}={value}" if keywords else value)
    source = (f"def decode(r):\n"
              f"    try:\n"
              f"        return cls({', '.join(args)})\n"
              f"    except KeyError:\n"
              f"        return slow(r)\n")
    return typing.cast(Decoder, _compile(source, scope, "decode"))


def _decode_present(cls: Any, record: dict[str, Any]) -> Any:
    """The general path: only the fields ``record`` has (a KeyError in the compiled path
    may also come from a nested record; this raises it again where it belongs)."""
    kwargs = {}
    for f in _fields(cls):
        if f.name not in record:
            continue
        raw = record[f.name]
        if f.kind == "enum":
            kwargs[f.name] = f.type(raw)
        elif f.kind == "record":
            kwargs[f.name] = decoder(f.type)(raw)
        elif f.kind == "optional":
            kwargs[f.name] = None if raw is None else decoder(f.type)(raw)
        elif f.kind == "records":
            kwargs[f.name] = tuple(decoder(f.type)(x) for x in raw)
        else:
            kwargs[f.name] = raw
    return cls(**kwargs)


def to_record(obj: Any) -> dict[str, Any]:
    cls: type = type(obj)
    return encoder(cls)(obj)


def from_record(cls: type, record: dict[str, Any]) -> Any:
    return decoder(cls)(record)
