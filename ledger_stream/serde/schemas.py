"""The Avro schemas of ``schemas/``, parsed once per process.

A ``SchemaSet`` knows the current (reader) schema of every event and every writer schema it
may meet on the wire, by CRC-64-AVRO fingerprint: the current ones plus older versions kept
in ``schemas/history/`` and the schemas of every release in ``schemas/released/<version>/``,
so that events written by version N stay readable by N+1.

Two environment variables serve a rolling upgrade (docs/operations.md, "Upgrading the
ledger"): ``LEDGER_WRITE_SCHEMAS=<version>`` makes a process write every event in the
schemas of that release (its readers still read both), so that processes of the previous
release, which know only their own schemas' fingerprints, can read everything it writes;
``LEDGER_SCHEMA_DIR`` loads the schemas from another folder than the packaged one.
"""

from __future__ import annotations

import json
import os
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
RELEASED = "released"  # schemas/released/<version>/*.avsc: what each release writes


@dataclass(frozen=True)
class SchemaVersion:
    name: str  # short record name, e.g. "Intent"
    parsed: Any
    fingerprint: bytes  # 8 bytes, little-endian CRC-64-AVRO, as single-object encoding wants
    raw: dict[str, Any]
    fields: frozenset[str] = frozenset()  # the record's field names

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> SchemaVersion:
        try:
            parsed = fastavro.parse_schema(raw, named_schemas={})
        except Exception as exc:  # fastavro raises several unrelated types
            raise SerdeError(f"invalid schema {raw.get('name')!r}: {exc}") from exc
        canonical = to_parsing_canonical_form(parsed)
        fp = bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
        names = frozenset(f["name"] for f in raw.get("fields", ()) if isinstance(f, dict))
        return cls(raw["name"].rsplit(".", 1)[-1], parsed, fp, raw, names)


class SchemaSet:
    def __init__(self, current: Iterable[dict[str, Any]],
                 history: Iterable[dict[str, Any]] = (),
                 writing: Iterable[dict[str, Any]] = ()) -> None:
        """``writing``: the schemas to write events in instead of the current ones (a
        release's, during a rolling upgrade); each is readable too."""
        self._current = {v.name: v for v in map(SchemaVersion.parse, current)}
        self._by_fingerprint = {v.fingerprint: v for v in self._current.values()}
        self._writing = {v.name: v for v in map(SchemaVersion.parse, writing)}
        for old in [*map(SchemaVersion.parse, history), *self._writing.values()]:
            self._by_fingerprint.setdefault(old.fingerprint, old)

    @classmethod
    def load(cls, directory: Path = SCHEMA_DIR, write_release: str | None = None) -> SchemaSet:
        """The schemas of ``directory``; with ``write_release``, writing in the schemas of
        ``directory/released/<write_release>/`` (SerdeError if there is no such release)."""
        current = [_read(p) for p in sorted(directory.glob("*.avsc"))]
        history = [_read(p) for p in sorted((directory / "history").glob("*.avsc"))]
        history += [_read(p) for p in sorted((directory / RELEASED).glob("*/*.avsc"))]
        if not current:
            raise SerdeError(f"no Avro schemas in {directory}")
        writing: list[dict[str, Any]] = []
        if write_release:
            release = directory / RELEASED / write_release
            writing = [_read(p) for p in sorted(release.glob("*.avsc"))]
            if not writing:
                known = sorted(p.name for p in (directory / RELEASED).glob("*"))
                raise SerdeError(f"no released schemas {write_release!r} in "
                                 f"{directory / RELEASED} (known: {', '.join(known)})")
        return cls(current, history, writing)

    def current(self, name: str) -> SchemaVersion:
        try:
            return self._current[name]
        except KeyError:
            raise SerdeError(f"no schema for event type {name!r}") from None

    def writer(self, name: str) -> SchemaVersion:
        """The schema events of type ``name`` are written in: the release's being written
        (an event type it lacks in the current schema), else the current one."""
        return self._writing.get(name) or self.current(name)

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
    """The process's schemas: ``LEDGER_SCHEMA_DIR`` (default: the packaged ones), written in
    the release ``LEDGER_WRITE_SCHEMAS`` names (default: the current schemas)."""
    directory = os.environ.get("LEDGER_SCHEMA_DIR")
    return SchemaSet.load(Path(directory) if directory else SCHEMA_DIR,
                          os.environ.get("LEDGER_WRITE_SCHEMAS") or None)
