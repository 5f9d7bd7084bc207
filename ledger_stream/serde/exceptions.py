"""Errors of the Avro serde. Library errors are wrapped with ``from exc``.

Decoding a record ends in exactly one of three ways, and a consumer treats each differently:

- an event: process it;
- ``DecodeError``: the bytes are not a ledger event (poison): dead-letter them with the
  message as the reason, alert, and go on with the next record;
- ``SchemaRegistryUnavailable``: the writer schema could not be fetched and nothing is known
  about the record: pause, and retry the same record later. Never dead-letter it.

A registry outage never turns a valid event into poison; an unknown or foreign schema is
poison.
"""

from __future__ import annotations


class SerdeError(Exception):
    """Base class of serde errors."""


class DecodeError(SerdeError):
    """Bytes that are not a ledger event: the message says what was wrong with them."""


class EncodeError(SerdeError):
    """An event that does not fit its schema."""


class SchemaRegistryError(SerdeError):
    """Base class of schema registry errors. ``status`` is the HTTP status of the answer and
    ``error_code`` the registry's own code (e.g. 40403), when there was one."""

    def __init__(self, message: str, *, status: int | None = None,
                 error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class SchemaRegistryUnavailable(SchemaRegistryError):
    """The registry could not answer, so nothing is known about the schema asked for: the
    connection failed or timed out, the name did not resolve, it answered 5xx, 408, 425, 429,
    refused our credentials (401, 403, 407: an operator problem, not bad data), answered 4xx
    without a registry error body (a proxy, a wrong URL) or answered something that is not
    its JSON. The last holds for a 200 too: a cut-off or non-JSON body says nothing about
    the record. Transient: retry the same record later. Deliberately not a ``DecodeError``."""


class SchemaRegistryRefused(SchemaRegistryError):
    """The registry answered the request with its own error (a 4xx with an ``error_code``,
    e.g. 40403 schema not found, 409 incompatible schema). Retrying gives the same answer.
    When decoding this becomes a ``DecodeError`` (poison); when encoding it means our schema
    was not accepted."""
