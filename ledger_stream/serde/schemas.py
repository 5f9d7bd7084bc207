"""The Avro schemas of ``schemas/``, parsed once per process.

A ``SchemaSet`` knows the current (reader) schema of every event and every writer schema it
may meet on the wire, by CRC-64-AVRO fingerprint: the current ones plus older versions kept
in ``schemas/history/`` so that events written by version N stay readable by N+1.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from ledger_stream.serde.exceptions import SerdeError


def _schema_dir() -> Path:
    """``ledger_stream/schemas`` (packaged, or the symlink in a checkout); in a copy of the
    source tree that dropped the symlink (a mutation tester's), the checkout's ``schemas/``."""
    packaged = Path(__file__).resolve().parent.parent / "schemas"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "schemas"


SCHEMA_DIR = _schema_dir()


@dataclass(frozen=True)
class SchemaVersion:
    name: str  # short record name, e.g. "Intent"
    parsed: Any
    fingerprint: bytes  # 8 bytes, little-endian CRC-64-AVRO, as single-object encoding wants
    raw: dict[str, Any]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> SchemaVersion:
        try:
            parsed = fastavro.parse_schema(raw, named_schemas={})
        except Exception as exc:  # fastavro raises several unrelated types
            raise SerdeError(f"invalid schema {raw.get('name')!r}: {exc}") from exc
        canonical = to_parsing_canonical_form(parsed)
        fp = bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
        return cls(raw["name"].rsplit(".", 1)[-1], parsed, fp, raw)


class SchemaSet:
    def __init__(self, current: Iterable[dict[str, Any]],
                 history: Iterable[dict[str, Any]] = ()) -> None:
        self._current = {v.name: v for v in map(SchemaVersion.parse, current)}
        self._by_fingerprint = {v.fingerprint: v for v in self._current.values()}
        for old in map(SchemaVersion.parse, history):
            self._by_fingerprint.setdefault(old.fingerprint, old)

    @classmethod
    def load(cls, directory: Path = SCHEMA_DIR) -> SchemaSet:
        current = [_read(p) for p in sorted(directory.glob("*.avsc"))]
        history = [_read(p) for p in sorted((directory / "history").glob("*.avsc"))]
        if not current:
            raise SerdeError(f"no Avro schemas in {directory}")
        return cls(current, history)

    def current(self, name: str) -> SchemaVersion:
        try:
            return self._current[name]
        except KeyError:
            raise SerdeError(f"no schema for event type {name!r}") from None

    def by_fingerprint(self, fp: bytes) -> SchemaVersion | None:
        return self._by_fingerprint.get(fp)

    def names(self) -> list[str]:
        return sorted(self._current)


def _read(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@cache
def default_schemas() -> SchemaSet:
    return SchemaSet.load()
