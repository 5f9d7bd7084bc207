"""A different value for any field of a domain value, for the tests that check a copy or a
constructor stores and copies every field."""

from __future__ import annotations

import dataclasses
import enum


def different(old: object) -> object:
    if isinstance(old, enum.Enum):
        return next(m for m in type(old) if m is not old)
    if isinstance(old, bool):
        return not old
    if isinstance(old, int):
        return old + 1
    if isinstance(old, str):
        return old + "x"
    if isinstance(old, bytes):
        return old + b"x"
    if isinstance(old, tuple):
        return () if old else (1,)
    if old is None:
        return "set"
    if dataclasses.is_dataclass(old):
        return different_fields(old)
    raise AssertionError(f"no different value for {old!r}")


def different_fields(value: object) -> object:
    f = dataclasses.fields(value)[0]  # type: ignore[arg-type]
    return dataclasses.replace(value, **{f.name: different(getattr(value, f.name))})  # type: ignore[type-var]
