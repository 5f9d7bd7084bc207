"""Avro encoding of ledger events, with a frame that names the writer schema.

Default frame: Avro single-object encoding (``0xC3 0x01``, the 8-byte CRC-64-AVRO
fingerprint, the body). With a registry, Confluent framing (see registry.py). Decoding
resolves the writer schema into the current reader schema, so old events stay readable.
Anything that is not a whole, valid event raises ``DecodeError`` saying what was wrong.
With a registry, decoding also raises ``SchemaRegistryUnavailable`` when the writer schema
cannot be fetched: a registry outage never turns a valid event into poison; an unknown or
foreign schema is poison.
"""

from __future__ import annotations

import io
from typing import Any, Protocol

from fastavro import schemaless_reader, schemaless_writer
from fastavro.read import SchemaResolutionError

from ledger_stream.domain import events as ev
from ledger_stream.serde.exceptions import DecodeError, EncodeError, SerdeError
from ledger_stream.serde.records import from_record, to_record
from ledger_stream.serde.schemas import SchemaSet, SchemaVersion, default_schemas

SINGLE_OBJECT_MAGIC = b"\xc3\x01"

EVENT_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        ev.Intent, ev.AttemptClaim, ev.AttemptOutcome, ev.ReconcileResult,
        ev.OperatorResolution, ev.Dispatch, ev.Grant, ev.Held, ev.Reconcile, ev.Done,
        ev.Receipt, ev.Alert, ev.DeadLetter, ev.Tick, ev.Containment, ev.AuditRecord,
    )
}


class Framing(Protocol):
    def header(self, version: SchemaVersion) -> bytes: ...

    def writer(self, data: bytes) -> tuple[SchemaVersion, int]:
        """The writer schema of ``data`` and the offset where its body starts."""
        ...


class SingleObjectFraming:
    def __init__(self, schemas: SchemaSet) -> None:
        self._schemas = schemas

    def header(self, version: SchemaVersion) -> bytes:
        return SINGLE_OBJECT_MAGIC + version.fingerprint

    def writer(self, data: bytes) -> tuple[SchemaVersion, int]:
        if len(data) < 10:
            raise DecodeError(f"{len(data)} bytes: too short for an Avro single-object frame")
        if data[:2] != SINGLE_OBJECT_MAGIC:
            raise DecodeError(f"no Avro single-object marker (starts with {data[:2].hex()})")
        version = self._schemas.by_fingerprint(data[2:10])
        if version is None:
            raise DecodeError(f"unknown schema fingerprint {data[2:10].hex()}")
        return version, 10


class AvroCodec:
    """Encodes domain events to framed Avro and back. Thread-safe; schemas parsed once."""

    def __init__(self, schemas: SchemaSet | None = None, framing: Framing | None = None):
        self.schemas = schemas or default_schemas()
        self._framing = framing or SingleObjectFraming(self.schemas)

    def encode(self, event: Any) -> bytes:
        """``event`` in its writer schema. A writer schema older than the event's class (a
        release's, written during a rolling upgrade) leaves out the fields added since,
        which every later field is, with a default its readers fill in; any other
        mismatch is an EncodeError."""
        name = type(event).__name__
        record = to_record(event)
        version = self.schemas.writer(name)
        if len(record) > len(version.fields):
            record = {k: v for k, v in record.items() if k in version.fields}
        return self.encode_record(name, record)

    def encode_record(self, name: str, record: dict[str, Any]) -> bytes:
        version = self.schemas.writer(name)
        buf = io.BytesIO()
        buf.write(self._framing.header(version))
        try:
            schemaless_writer(buf, version.parsed, record, strict_allow_default=True)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise EncodeError(f"{name} does not fit its schema: {exc}") from exc
        return buf.getvalue()

    def decode_record(self, data: bytes | None) -> tuple[str, dict[str, Any]]:
        """(event type name, record as a dict in the current reader schema).

        Raises ``DecodeError`` for bytes that are not a ledger event (poison), and lets
        ``SchemaRegistryUnavailable`` from the framing through (retry the record later)."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise DecodeError(f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
        writer, start = self._framing.writer(data)
        try:
            reader = self.schemas.current(writer.name)
        except SerdeError as exc:  # a framing that let a foreign writer schema through
            raise DecodeError(f"writer schema {writer.name} is not a ledger event") from exc
        stream = io.BytesIO(data)
        stream.seek(start)
        try:
            record = schemaless_reader(
                stream, writer.parsed, None if reader is writer else reader.parsed
            )
        except SchemaResolutionError as exc:
            raise DecodeError(f"writer schema of {writer.name} cannot be resolved into the "
                              f"reader schema: {exc}") from exc
        except Exception as exc:  # truncated or corrupt bodies raise many types
            raise DecodeError(f"corrupt {writer.name} body: {type(exc).__name__}: {exc}") \
                from exc
        if stream.tell() != len(data):
            raise DecodeError(f"{len(data) - stream.tell()} trailing bytes after {writer.name}")
        if not isinstance(record, dict):
            raise DecodeError(f"{writer.name} body is not a record")
        return writer.name, record

    def decode(self, data: bytes | None, expect: tuple[type[Any], ...] = ()) -> Any:
        """The domain event in ``data``; DecodeError if it is not one (of ``expect``)."""
        name, record = self.decode_record(data)
        cls = EVENT_TYPES.get(name)
        if cls is None or (expect and cls not in expect):
            wanted = ", ".join(c.__name__ for c in expect) or "a ledger event"
            raise DecodeError(f"got {name}, expected {wanted}")
        try:
            return from_record(cls, record)
        except (TypeError, ValueError) as exc:
            raise DecodeError(f"{name} does not match its type: {exc}") from exc


def make_codec(registry_url: str | None = None) -> AvroCodec:
    """Single-object framing, or Confluent framing when a registry URL is configured."""
    if not registry_url:
        return AvroCodec()
    from ledger_stream.serde.registry import RegistryClient, RegistryFraming

    schemas = default_schemas()
    return AvroCodec(schemas, RegistryFraming(RegistryClient(registry_url), schemas))
