"""Confluent Schema Registry framing: ``0x00``, a 4-byte big-endian schema id, the body.

Used instead of single-object encoding when a registry URL is configured. The client speaks
the registry's REST API with the standard library; ids are cached, so each schema is
registered and each id fetched once per process.

Guarantee: a registry outage never turns a valid event into poison; an unknown or foreign
schema is poison. Decoding a record whose writer schema cannot be fetched raises
``SchemaRegistryUnavailable`` (pause, retry the record); a schema id the registry says it
does not have, or a schema that is not one of the ledger's event records, raises
``DecodeError`` (dead-letter the record).
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import struct
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from ledger_stream.serde.exceptions import (
    DecodeError,
    SchemaRegistryError,
    SchemaRegistryRefused,
    SchemaRegistryUnavailable,
    SerdeError,
)
from ledger_stream.serde.schemas import SchemaSet, SchemaVersion

MAGIC = b"\x00"
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# Statuses that say nothing about the schema asked for. Credentials count: an expired
# password is an operator problem, and must not dead-letter valid events.
_TRANSIENT_STATUS = frozenset({401, 403, 407, 408, 425, 429})
_CREDENTIALS_STATUS = frozenset({401, 403, 407})


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: int
    text: str  # the schema as the registry stores it (for Avro: JSON text)
    schema_type: str = "AVRO"


class RegistryClient:
    """The two registry calls the framing needs.

    Failure behaviour: ``SchemaRegistryUnavailable`` when the registry could not answer
    (see its docstring), ``SchemaRegistryRefused`` when it answered with its own error. The
    message names the method, path and cause; credentials given as ``user:password@`` in the
    URL are sent as HTTP basic auth and never appear in a message. Each socket operation
    (connect, send, each read) waits at most ``timeout_s``, and reading an answer stops once
    ``timeout_s`` has passed since the request; name resolution is bounded by the system
    resolver.
    """

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"registry timeout must be a positive number of seconds, "
                             f"got {timeout_s!r}")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("registry URL must be http(s)://host[:port][/path]")
        host_port = parts.netloc.rpartition("@")[2]
        # The URL without credentials: used for requests and safe to show in messages.
        self._url = urllib.parse.urlunsplit(
            (parts.scheme, host_port, parts.path.rstrip("/"), "", ""))
        self._auth: str | None = None
        if parts.username is not None:
            user_password = (f"{urllib.parse.unquote(parts.username)}:"
                             f"{urllib.parse.unquote(parts.password or '')}")
            self._auth = "Basic " + base64.b64encode(user_password.encode()).decode()
        self._timeout = timeout_s

    def register(self, subject: str, schema: dict[str, Any]) -> int:
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
        answer = self._call("POST", path, {"schema": json.dumps(schema)})
        schema_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(schema_id, int) or isinstance(schema_id, bool):
            raise self._invalid("POST", path, "no integer id")
        return schema_id

    def schema(self, schema_id: int) -> RegisteredSchema:
        path = f"/schemas/ids/{schema_id}"
        answer = self._call("GET", path)
        text = answer.get("schema") if isinstance(answer, dict) else None
        schema_type = answer.get("schemaType", "AVRO") if isinstance(answer, dict) else None
        if not isinstance(text, str) or not isinstance(schema_type, str):
            raise self._invalid("GET", path, "no schema text")
        return RegisteredSchema(schema_id, text, schema_type)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        where = f"schema registry {self._url} {method} {path}"
        request = urllib.request.Request(
            self._url + path, data=json.dumps(body).encode() if body is not None else None,
            method=method, headers={"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE},
        )
        if self._auth is not None:  # unredirected: a redirect to another host gets no password
            request.add_unredirected_header("Authorization", self._auth)
        deadline = time.monotonic() + self._timeout
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                data = _read_until(response, deadline)
        except urllib.error.HTTPError as exc:
            raise _http_error(where, exc) from exc
        except TimeoutError as exc:
            raise SchemaRegistryUnavailable(
                f"{where}: no answer within {self._timeout:g} s") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                cause = f"no answer within {self._timeout:g} s"
            else:
                cause = str(exc.reason)
            raise SchemaRegistryUnavailable(f"{where}: {cause}") from exc
        except (OSError, http.client.HTTPException) as exc:  # reset, truncated answer, ...
            raise SchemaRegistryUnavailable(f"{where}: {type(exc).__name__}: {exc}") from exc
        try:
            return json.loads(data)
        except ValueError as exc:
            raise self._invalid(method, path, f"not JSON ({exc})") from exc

    def _invalid(self, method: str, path: str, what: str) -> SchemaRegistryUnavailable:
        # An answer that is not the registry's JSON says nothing about the schema asked
        # for (a proxy's login page, a cut-off body): retry rather than dead-letter.
        return SchemaRegistryUnavailable(
            f"schema registry {self._url} {method} {path}: invalid answer: {what}", status=200)


def _read_until(response: http.client.HTTPResponse, deadline: float) -> bytes:
    chunks = []
    while chunk := response.read(65536):
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError("answer still arriving at the deadline")
    data = b"".join(chunks)
    if response.length:  # read(amt) returns a cut-off body without complaint
        raise http.client.IncompleteRead(data, response.length)
    return data


def _http_error(where: str, exc: urllib.error.HTTPError) -> SchemaRegistryError:
    """Refused only when the registry itself answered with its error about the request;
    anything else (5xx, credentials, throttling, a 404 from a wrong URL) is unavailable."""
    status = exc.code
    error_code, message = _error_body(exc)
    cause = f"HTTP {status}"
    if error_code is not None:
        cause += f" error {error_code}"
    cause += f": {message or exc.reason}"
    refused = 400 <= status < 500 and status not in _TRANSIENT_STATUS \
        and _is_registry_answer(status, error_code)
    if status in _CREDENTIALS_STATUS:
        cause += " (credentials refused: check the registry user and password)"
    elif 400 <= status < 500 and not refused and status not in _TRANSIENT_STATUS:
        cause += " (not a registry answer: is the registry URL right?)"
    error = SchemaRegistryRefused if refused else SchemaRegistryUnavailable
    return error(f"{where}: {cause}", status=status, error_code=error_code)


def _is_registry_answer(status: int, error_code: int | None) -> bool:
    """Whether a 4xx is the registry's own answer. Its error bodies carry ``error_code``
    (40403 schema not found, 42201 invalid schema, 409 incompatible). A 404 counts only
    with a 404xx code: Confluent answers an unknown path with ``error_code`` 404, and a
    proxy or a wrong URL prefix gives a 404 without a body."""
    if error_code is None:
        return False
    return error_code // 100 == 404 if status == 404 else True


def _error_body(exc: urllib.error.HTTPError) -> tuple[int | None, str | None]:
    """(error_code, message) of a registry error body; None for what is missing."""
    try:
        body = json.loads(exc.read(65536))
    except Exception:  # no body, a cut-off body, HTML: not a registry error
        return None, None
    finally:
        exc.close()
    if not isinstance(body, dict):
        return None, None
    code = body.get("error_code")
    message = str(body.get("message", ""))[:200] or None
    if not isinstance(code, int) or isinstance(code, bool):
        return None, message
    return code, message


class RegistryFraming:
    """Subjects follow the record-name strategy (``io.ledgerstream.Intent``), since one topic
    carries several event types.

    ``writer`` raises ``DecodeError`` (poison) for a schema id the registry answered with
    its own error (40403 schema not found, other 4xx with an error code), a schema that is
    not Avro, does not parse, is not a record, or is a record that is not one of the
    ledger's event types by full name (``com.other.Payment``, ``com.other.Intent``). It
    raises ``SchemaRegistryUnavailable`` when the registry could not answer. Schemas are
    cached by id; poison answers are cached for ``poison_ttl_s`` (at most ``poison_ids``
    ids), so a flood of records with one bad id costs one request; unavailability is never
    cached. ``header`` raises ``SchemaRegistryUnavailable`` when our schema could not be
    registered for the same reasons, ``SchemaRegistryRefused`` when the registry refused it.
    """

    def __init__(self, client: RegistryClient, schemas: SchemaSet,
                 poison_ttl_s: float = 60.0, poison_ids: int = 1024) -> None:
        self._client = client
        self._schemas = schemas
        self._ids: dict[str, int] = {}
        self._by_id: dict[int, SchemaVersion] = {}
        self._ledger_names = {_full_name(schemas.current(n).raw) for n in schemas.names()}
        self._poison_ttl_s = poison_ttl_s
        self._poison_ids = poison_ids
        self._poison: dict[int, tuple[float, str]] = {}  # id -> (expiry, reason)
        self._lock = threading.Lock()

    def header(self, version: SchemaVersion) -> bytes:
        schema_id = self._ids.get(version.name)
        if schema_id is None:
            schema_id = self._client.register(_full_name(version.raw), version.raw)
            self._ids[version.name] = schema_id
            self._by_id[schema_id] = version
        return MAGIC + struct.pack(">I", schema_id)

    def writer(self, data: bytes) -> tuple[SchemaVersion, int]:
        if len(data) < 5 or data[:1] != MAGIC:
            raise DecodeError("not schema-registry framed (no 0x00 magic byte and id)")
        (schema_id,) = struct.unpack_from(">I", data, 1)
        version = self._by_id.get(schema_id)
        if version is None:
            version = self._fetch(schema_id)
            self._by_id[schema_id] = version
        return version, 5

    def _fetch(self, schema_id: int) -> SchemaVersion:
        known = self._known_poison(schema_id)
        if known is not None:
            raise DecodeError(known)
        try:
            return self._ledger_version(self._client.schema(schema_id))
        except SchemaRegistryRefused as exc:
            reason = (f"schema id {schema_id} not found in the registry: {exc}"
                      if exc.status == 404 else f"schema id {schema_id} refused: {exc}")
            self._remember_poison(schema_id, reason)
            raise DecodeError(reason) from exc
        except DecodeError as exc:
            self._remember_poison(schema_id, str(exc))
            raise
        # SchemaRegistryUnavailable passes through, uncached: the record is retried.

    def _ledger_version(self, registered: RegisteredSchema) -> SchemaVersion:
        where = f"schema id {registered.schema_id}"
        if registered.schema_type != "AVRO":
            raise DecodeError(f"{where} is a {registered.schema_type} schema, not Avro")
        try:
            raw = json.loads(registered.text)
        except ValueError as exc:
            raise DecodeError(f"{where} does not parse: not JSON ({exc})") from exc
        if not isinstance(raw, dict) or raw.get("type") != "record" \
                or not isinstance(raw.get("name"), str):
            raise DecodeError(f"{where} is not a record schema: {registered.text[:80]}")
        name = _full_name(raw)
        if name not in self._ledger_names:
            raise DecodeError(f"{where} is {name}, not a ledger event "
                              f"({', '.join(sorted(self._ledger_names))})")
        try:
            return SchemaVersion.parse(raw)
        except SerdeError as exc:
            raise DecodeError(f"{where} ({name}) does not parse: {exc}") from exc

    def _known_poison(self, schema_id: int) -> str | None:
        with self._lock:
            entry = self._poison.get(schema_id)
            if entry is None:
                return None
            expiry, reason = entry
            if time.monotonic() < expiry:
                return reason
            del self._poison[schema_id]
            return None

    def _remember_poison(self, schema_id: int, reason: str) -> None:
        with self._lock:
            if len(self._poison) >= self._poison_ids:
                del self._poison[next(iter(self._poison))]  # the oldest
            self._poison[schema_id] = (time.monotonic() + self._poison_ttl_s, reason)


def _full_name(raw: dict[str, Any]) -> str:
    name = str(raw["name"])
    namespace = raw.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"
