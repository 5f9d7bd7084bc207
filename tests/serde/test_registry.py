"""Schema registry failures: an outage never turns a valid event into poison; an unknown or
foreign schema is poison (``DecodeError``), never a crash.

Every test talks to a real HTTP server on 127.0.0.1 (``fake_registry.FakeRegistry``).
"""

from __future__ import annotations

import io
import json
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer

from ledger_stream.serde import (
    AvroCodec,
    DecodeError,
    RegisteredSchema,
    RegistryClient,
    RegistryFraming,
    SchemaRegistryError,
    SchemaRegistryUnavailable,
    SerdeError,
    default_schemas,
)
from tests.factories import intent
from tests.serde.fake_registry import FakeRegistry

pytestmark = pytest.mark.timeout(30)

EVENT = intent()

PAYMENT = {"type": "record", "name": "Payment", "namespace": "com.other",
           "fields": [{"name": "amount", "type": "long"}]}


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    server = FakeRegistry().start()
    yield server
    server.stop()


def codec_for(url: str, timeout_s: float = 5.0) -> AvroCodec:
    schemas = default_schemas()
    return AvroCodec(schemas, RegistryFraming(RegistryClient(url, timeout_s=timeout_s), schemas))


def framed(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + body


def avro_body(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), record)
    return buf.getvalue()


def poison(codec: AvroCodec, data: bytes) -> DecodeError:
    """The DecodeError decoding ``data`` raises; any other exception fails the test."""
    with pytest.raises(SerdeError) as info:
        codec.decode(data)
    assert isinstance(info.value, DecodeError), \
        f"crash, not poison: {type(info.value).__name__}: {info.value}"
    return info.value


def unavailable(codec: AvroCodec, data: bytes) -> SchemaRegistryUnavailable:
    with pytest.raises(SerdeError) as info:
        codec.decode(data)
    assert isinstance(info.value, SchemaRegistryUnavailable), \
        f"{type(info.value).__name__}: {info.value}"
    assert not isinstance(info.value, DecodeError)
    return info.value


# Poison: the registry's answer says the record is not one of ours.

@pytest.mark.parametrize("foreign", [
    PAYMENT,
    {**PAYMENT, "name": "Intent"},  # our event's short name in someone else's namespace
])
def test_a_foreign_record_schema_is_poison_not_a_crash(registry, foreign):
    schema_id = registry.put(foreign)
    error = poison(codec_for(registry.url), framed(schema_id, avro_body(foreign, {"amount": 5})))
    assert f"schema id {schema_id}" in str(error)
    assert f"com.other.{foreign['name']}" in str(error) and "not a ledger event" in str(error)


def test_an_id_the_registry_does_not_know_is_poison_naming_the_id_and_asked_once(registry):
    data = codec_for(registry.url).encode(EVENT)
    reader = codec_for(registry.url)
    for _ in range(3):
        error = poison(reader, framed(77, data[5:]))
        assert "schema id 77" in str(error) and "not found" in str(error)
    assert registry.requests.count(("GET", "/schemas/ids/77")) == 1
    assert reader.decode(data) == EVENT


@pytest.mark.parametrize("text, schema_type, says", [
    ('{"type": "record", "name": "Intent", "namespace": "io.ledgerstream", "fields": 7}',
     None, "does not parse"),
    ("not json {", None, "does not parse"),
    ('"string"', None, "not a record"),
    ('syntax = "proto3"; message Intent {}', "PROTOBUF", "PROTOBUF"),
])
def test_a_schema_that_is_not_an_avro_record_is_poison(registry, text, schema_type, says):
    schema_id = registry.put(text, schema_type)
    error = poison(codec_for(registry.url), framed(schema_id, b"\x02"))
    assert f"schema id {schema_id}" in str(error) and says in str(error)


def test_our_record_name_with_a_schema_that_does_not_resolve_is_poison(registry):
    alien_intent = {"type": "record", "name": "Intent", "namespace": "io.ledgerstream",
                    "fields": [{"name": "surprise", "type": "long"}]}
    schema_id = registry.put(alien_intent)
    data = framed(schema_id, avro_body(alien_intent, {"surprise": 1}))
    error = poison(codec_for(registry.url), data)
    assert "cannot be resolved" in str(error) and "Intent" in str(error)


def test_a_4xx_answer_about_the_id_is_poison(registry):
    data = codec_for(registry.url).encode(EVENT)
    registry.fail_with(422, 42202)
    error = poison(codec_for(registry.url), data)
    assert "schema id 1" in str(error) and "HTTP 422" in str(error)


# Unavailable: the registry said nothing about the record; pause and retry, never poison.

@pytest.mark.parametrize("status, error_code", [
    (500, 50001), (503, None), (502, None), (429, 42901), (401, 40101), (403, 40301),
    (404, None),  # a bare 404 is a wrong URL or path prefix, not an answer about the id
    (408, None),
])
def test_an_outage_is_unavailable_and_the_same_bytes_decode_once_it_ends(
        registry, status, error_code):
    data = codec_for(registry.url).encode(EVENT)
    reader = codec_for(registry.url)
    registry.fail_with(status, error_code)
    for _ in range(2):
        error = unavailable(reader, data)
        assert f"GET /schemas/ids/1: HTTP {status}" in str(error)
    assert registry.requests.count(("GET", "/schemas/ids/1")) == 2  # failures are not cached
    registry.heal()
    assert reader.decode(data) == EVENT


def test_a_stopped_registry_is_unavailable_and_the_same_bytes_decode_once_it_is_back(registry):
    data = codec_for(registry.url).encode(EVENT)
    reader = codec_for(registry.url)
    registry.stop()
    error = unavailable(reader, data)
    assert "GET /schemas/ids/1" in str(error) and "refused" in str(error)
    registry.start()
    assert reader.decode(data) == EVENT


def test_a_200_answer_that_is_not_the_registrys_json_is_unavailable(registry):
    data = codec_for(registry.url).encode(EVENT)
    reader = codec_for(registry.url)
    registry.fail_with(200, body=b"<html>please log in</html>")
    assert "invalid answer" in str(unavailable(reader, data))
    registry.fail_with(200, body=b'{"no_schema_here": 1}')
    assert "invalid answer" in str(unavailable(reader, data))
    registry.heal()
    assert reader.decode(data) == EVENT


def test_a_cut_off_answer_is_unavailable(registry):
    data = codec_for(registry.url).encode(EVENT)
    reader = codec_for(registry.url)
    registry.cut_short = True
    assert "IncompleteRead" in str(unavailable(reader, data))
    registry.heal()
    assert reader.decode(data) == EVENT


def test_a_slow_registry_is_unavailable_within_the_client_timeout(registry):
    data = codec_for(registry.url).encode(EVENT)
    registry.delay_s = 20.0
    started = time.monotonic()
    error = unavailable(codec_for(registry.url, timeout_s=0.3), data)
    assert time.monotonic() - started < 2.0
    assert "no answer within 0.3 s" in str(error)


def test_an_unresolvable_registry_host_is_unavailable():
    data = framed(1, b"")
    error = unavailable(codec_for("http://registry.invalid:8081"), data)
    assert "GET /schemas/ids/1" in str(error)


def test_the_client_timeout_is_bounded():
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            RegistryClient("http://127.0.0.1:1", timeout_s=bad)


# Encoding

def test_encoding_while_the_registry_is_down_raises_unavailable(registry):
    registry.stop()
    with pytest.raises(SchemaRegistryUnavailable,
                       match="POST /subjects/io.ledgerstream.Intent/versions"):
        codec_for(registry.url).encode(EVENT)
    registry.start()
    registry.fail_with(503)
    with pytest.raises(SchemaRegistryUnavailable, match="HTTP 503"):
        codec_for(registry.url).encode(EVENT)


def test_a_refused_registration_is_a_registry_error_not_unavailable(registry):
    registry.fail_with(409, 409)
    with pytest.raises(SchemaRegistryError, match="HTTP 409") as info:
        codec_for(registry.url).encode(EVENT)
    assert not isinstance(info.value, SchemaRegistryUnavailable | DecodeError)


# Caching and credentials

def test_each_schema_is_registered_and_fetched_once(registry):
    writer = codec_for(registry.url)
    data = [writer.encode(EVENT) for _ in range(3)]
    reader = codec_for(registry.url)
    assert all(reader.decode(d) == EVENT for d in data)
    assert registry.requests == [("POST", "/subjects/io.ledgerstream.Intent/versions"),
                                 ("GET", "/schemas/ids/1")]


def test_poison_answers_expire_and_are_bounded(registry):
    body = codec_for(registry.url).encode(EVENT)[5:]
    schemas = default_schemas()
    expiring = AvroCodec(schemas, RegistryFraming(RegistryClient(registry.url), schemas,
                                                  poison_ttl_s=0.0))
    for _ in range(2):
        poison(expiring, framed(77, body))
    assert registry.requests.count(("GET", "/schemas/ids/77")) == 2
    bounded = AvroCodec(schemas, RegistryFraming(RegistryClient(registry.url), schemas,
                                                 poison_ids=2))
    for schema_id in (80, 81, 82, 80):
        poison(bounded, framed(schema_id, body))
    assert registry.requests.count(("GET", "/schemas/ids/80")) == 2  # 80 was dropped for 82


def test_credentials_in_the_url_go_in_a_header_and_never_in_a_message(registry):
    url = f"http://ledger:s3cr%40t@127.0.0.1:{registry.port}"
    data = codec_for(url).encode(EVENT)
    assert registry.credentials == ["ledger:s3cr@t"]
    registry.fail_with(401, 40101)
    error = unavailable(codec_for(url), data)
    registry.stop()
    refused = unavailable(codec_for(url), data)
    for exc in (error, refused):
        text = f"{exc} {exc.__cause__!r} {exc.__cause__}"
        assert "s3cr" not in text and "ledger:" not in text
        assert f"127.0.0.1:{registry.port}" in str(exc)


def test_the_client_returns_the_schema_text_and_type(registry):
    avro_id, proto_id = registry.put(PAYMENT), registry.put("message P {}", "PROTOBUF")
    client = RegistryClient(registry.url + "/")
    assert client.schema(avro_id) == RegisteredSchema(avro_id, json.dumps(PAYMENT), "AVRO")
    assert client.schema(proto_id) == RegisteredSchema(proto_id, "message P {}", "PROTOBUF")
