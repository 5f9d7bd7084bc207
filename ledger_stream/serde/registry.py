"""Confluent Schema Registry framing: ``0x00``, a 4-byte big-endian schema id, the body.

Used instead of single-object encoding when a registry URL is configured. The client speaks
the registry's REST API with the standard library; ids are cached, so each schema is
registered and each unknown id fetched once per process.
"""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
from typing import Any

from ledger_stream.serde.exceptions import DecodeError, SchemaRegistryError
from ledger_stream.serde.schemas import SchemaSet, SchemaVersion

MAGIC = b"\x00"
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryClient:
    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self._url = url.rstrip("/")
        self._timeout = timeout_s

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self._url + path, data=data, method=method,
            headers={"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE},
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return json.load(response)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise SchemaRegistryError(f"schema registry {method} {path}: {exc}") from exc

    def register(self, subject: str, schema: dict[str, Any]) -> int:
        answer = self._call("POST", f"/subjects/{subject}/versions",
                            {"schema": json.dumps(schema)})
        return int(answer["id"])

    def schema(self, schema_id: int) -> dict[str, Any]:
        answer = self._call("GET", f"/schemas/ids/{schema_id}")
        return dict(json.loads(answer["schema"]))


class RegistryFraming:
    """Subjects follow the record-name strategy (``io.ledgerstream.Intent``), since one topic
    carries several event types."""

    def __init__(self, client: RegistryClient, schemas: SchemaSet) -> None:
        self._client = client
        self._schemas = schemas
        self._ids: dict[str, int] = {}
        self._by_id: dict[int, SchemaVersion] = {}

    def header(self, version: SchemaVersion) -> bytes:
        schema_id = self._ids.get(version.name)
        if schema_id is None:
            subject = f"{version.raw.get('namespace', '')}.{version.name}".lstrip(".")
            schema_id = self._client.register(subject, version.raw)
            self._ids[version.name] = schema_id
            self._by_id[schema_id] = version
        return MAGIC + struct.pack(">I", schema_id)

    def writer(self, data: bytes) -> tuple[SchemaVersion, int]:
        if len(data) < 5 or data[:1] != MAGIC:
            raise DecodeError("not schema-registry framed (no 0x00 magic byte and id)")
        (schema_id,) = struct.unpack_from(">I", data, 1)
        version = self._by_id.get(schema_id)
        if version is None:
            try:
                version = SchemaVersion.parse(self._client.schema(schema_id))
            except SchemaRegistryError as exc:
                raise DecodeError(f"unknown schema id {schema_id}: {exc}") from exc
            self._by_id[schema_id] = version
        return version, 5
