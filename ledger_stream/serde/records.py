"""Conversion between the domain's frozen dataclasses and Avro-ready dicts.

Converters are built once per class from its type hints: enums travel as their symbol,
nested dataclasses as dicts, optional nested dataclasses as dict or None.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from enum import Enum
from functools import cache
from typing import Any

Field = tuple[str, Callable[[Any], Any], Callable[[Any], Any]]


def _identity(value: Any) -> Any:
    return value


def _converters(hint: Any) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """(to_avro, from_avro) for one field type."""
    if isinstance(hint, type) and issubclass(hint, Enum):
        return (lambda v: v.value), hint
    if dataclasses.is_dataclass(hint):
        cls: Any = hint
        return (lambda v: to_record(v)), (lambda d: from_record(cls, d))
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) == 1 and dataclasses.is_dataclass(members[0]):
            enc, dec = _converters(members[0])
            return (lambda v: None if v is None else enc(v)), (
                lambda d: None if d is None else dec(d)
            )
    return _identity, _identity


@cache
def _fields(cls: type) -> tuple[Field, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, *_converters(hints[f.name])) for f in dataclasses.fields(cls)
    )


def to_record(obj: Any) -> dict[str, Any]:
    cls: Any = type(obj)
    return {name: enc(getattr(obj, name)) for name, enc, _ in _fields(cls)}


def from_record(cls: Any, record: dict[str, Any]) -> Any:
    return cls(**{name: dec(record[name]) for name, _, dec in _fields(cls) if name in record})
