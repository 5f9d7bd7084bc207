"""Errors of the Avro serde. Library errors are wrapped with ``from exc``."""


class SerdeError(Exception):
    """Base class of serde errors."""


class DecodeError(SerdeError):
    """Bytes that are not a ledger event: the message says what was wrong with them."""


class EncodeError(SerdeError):
    """An event that does not fit its schema."""


class SchemaRegistryError(SerdeError):
    """The schema registry refused or could not be reached."""
