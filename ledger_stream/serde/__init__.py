"""Avro serde of ledger events (fastavro; schemas parsed once per process).

Decoding gives an event, ``DecodeError`` (poison: dead-letter it) or, with a schema
registry, ``SchemaRegistryUnavailable`` (pause and retry the same record): a registry outage
never turns a valid event into poison; an unknown or foreign schema is poison.
"""

from ledger_stream.serde.codec import EVENT_TYPES, AvroCodec, SingleObjectFraming, make_codec
from ledger_stream.serde.exceptions import (
    DecodeError,
    EncodeError,
    SchemaRegistryError,
    SchemaRegistryRefused,
    SchemaRegistryUnavailable,
    SerdeError,
)
from ledger_stream.serde.registry import RegisteredSchema, RegistryClient, RegistryFraming
from ledger_stream.serde.schemas import SchemaSet, default_schemas

__all__ = [
    "EVENT_TYPES",
    "AvroCodec",
    "DecodeError",
    "EncodeError",
    "RegisteredSchema",
    "RegistryClient",
    "RegistryFraming",
    "SchemaRegistryError",
    "SchemaRegistryRefused",
    "SchemaRegistryUnavailable",
    "SchemaSet",
    "SerdeError",
    "SingleObjectFraming",
    "default_schemas",
    "make_codec",
]
