"""Avro serde of ledger events (fastavro; schemas parsed once per process)."""

from ledger_stream.serde.codec import EVENT_TYPES, AvroCodec, SingleObjectFraming, make_codec
from ledger_stream.serde.exceptions import DecodeError, EncodeError, SerdeError
from ledger_stream.serde.registry import RegistryClient, RegistryFraming
from ledger_stream.serde.schemas import SchemaSet, default_schemas

__all__ = [
    "EVENT_TYPES",
    "AvroCodec",
    "DecodeError",
    "EncodeError",
    "RegistryClient",
    "RegistryFraming",
    "SchemaSet",
    "SerdeError",
    "SingleObjectFraming",
    "default_schemas",
    "make_codec",
]
