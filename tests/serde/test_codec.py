"""Avro serde: every schema round-trips, garbage gives one typed error, N+1 reads N."""

from __future__ import annotations

import copy

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import sign_dev_approval
from ledger_stream.serde import (
    EVENT_TYPES,
    AvroCodec,
    DecodeError,
    RegistryClient,
    RegistryFraming,
    SchemaSet,
    default_schemas,
)
from ledger_stream.serde.records import to_record
from ledger_stream.serde.schemas import SCHEMA_DIR
from tests.factories import KEY, claim, intent
from tests.serde.events import one_of_each
from tests.serde.fake_registry import FakeRegistry

pytestmark = pytest.mark.timeout(30)




def test_every_schema_has_an_event_type_and_round_trips():
    codec = AvroCodec()
    samples = one_of_each()
    assert {type(s).__name__ for s in samples} == set(EVENT_TYPES) == set(codec.schemas.names())
    for sample in samples:
        data = codec.encode(sample)
        assert data[:2] == b"\xc3\x01"
        assert codec.decode(data) == sample


def test_every_field_is_documented():
    for name in default_schemas().names():
        raw = default_schemas().current(name).raw
        assert raw["namespace"] == "io.ledgerstream" and raw["doc"]
        assert all(f.get("doc") for f in raw["fields"]), name


@pytest.mark.parametrize("garbage, says", [
    (b"", "too short"),
    (b"not avro at all", "no Avro single-object marker"),
    (b"\xc3\x01" + b"\x00" * 8 + b"body", "unknown schema fingerprint"),
    (None, "expected bytes"),
])
def test_garbage_raises_decode_error_saying_what_was_wrong(garbage, says):
    with pytest.raises(DecodeError, match=says):
        AvroCodec().decode(garbage)


def test_truncated_and_padded_bodies_raise_decode_error():
    codec = AvroCodec()
    data = codec.encode(intent())
    with pytest.raises(DecodeError, match="corrupt Intent body"):
        codec.decode(data[:-5])
    with pytest.raises(DecodeError, match="trailing bytes"):
        codec.decode(data + b"\x00")


def test_decode_with_an_expected_type_refuses_others():
    codec = AvroCodec()
    with pytest.raises(DecodeError, match="got AttemptClaim, expected Intent"):
        codec.decode(codec.encode(claim()), expect=(ev.Intent,))


def _current_raw() -> list[dict]:
    s = default_schemas()
    return [copy.deepcopy(s.current(n).raw) for n in s.names()]


def test_reader_of_version_n_plus_1_reads_events_written_by_version_n():
    old = AvroCodec()
    written = old.encode(intent())
    newer_raw = _current_raw()
    for raw in newer_raw:
        if raw["name"] == "Intent":
            raw["fields"].append({"name": "priority", "type": "int", "default": 0,
                                  "doc": "added in version N+1"})
    newer = AvroCodec(SchemaSet(newer_raw, history=_current_raw()))
    name, record = newer.decode_record(written)
    assert name == "Intent" and record["priority"] == 0
    assert record["args_hash"] == intent().args_hash


def test_an_approval_written_before_key_ids_decodes_with_an_empty_key_id():
    """Intents written with the first Intent schema (no ``key_id`` in the approval) stay
    readable: the field's default fills in, so the ledger judges them as key-less."""
    import json

    v1 = json.loads((SCHEMA_DIR / "history" / "Intent.v1.avsc").read_text())
    assert "key_id" not in json.dumps(v1)
    others = [raw for raw in _current_raw() if raw["name"] != "Intent"]
    old_writer = AvroCodec(SchemaSet([v1, *others]))
    old = sign_dev_approval(b"k", KEY, "a1", "h" * 64, "p1", 99)
    record = to_record(intent(approval=old))
    del record["approval"]["key_id"]  # what a writer of the first schema had
    del record["observations"]  # nor did it carry observations
    written = old_writer.encode_record("Intent", record)
    read = AvroCodec().decode(written)
    assert isinstance(read, ev.Intent) and read.approval == old
    assert read.approval.key_id == ""


def test_schema_registry_framing_round_trips_through_a_registry_api():
    registry = FakeRegistry().start()
    try:
        schemas = default_schemas()
        writer = AvroCodec(schemas, RegistryFraming(RegistryClient(registry.url), schemas))
        data = writer.encode(intent())
        assert data[0] == 0 and int.from_bytes(data[1:5], "big") >= 1
        reader = AvroCodec(schemas, RegistryFraming(RegistryClient(registry.url), schemas))
        assert reader.decode(data) == writer.decode(data)
        with pytest.raises(DecodeError, match="schema id 3 not found"):
            reader.decode(b"\x00\x00\x00\x00\x03" + data[5:])
    finally:
        registry.stop()
