"""An event whose class has a field its writer schema lacks (a release's schema, written
during a rolling upgrade) is written without it; readers of either schema read it, the
field at its default."""

from __future__ import annotations

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.serde import AvroCodec, SchemaSet
from ledger_stream.serde.codec import EncodeError

pytestmark = pytest.mark.timeout(30)

RECEIPT = ev.Receipt(receipt_id="r1", key="acme/refund/inv-1", intent_event_id="i2",
                     status=ev.ReceiptStatus.SUCCEEDED, reason=ev.Reason.NONE,
                     args_hash="h", attempts=1, at_ms=1, external_id="re_1",
                     key_status=ev.ReceiptStatus.SUCCEEDED, effect_intent_id="i1")


def test_a_release_schema_writes_a_receipt_without_the_fields_added_since() -> None:
    release = AvroCodec(SchemaSet.load(write_release="0.1.0"))
    current = AvroCodec()
    data = release.encode(RECEIPT)
    for reader in (release, current):
        got = reader.decode(data)
        assert got == ev.Receipt(**{**_fields(RECEIPT), "effect_intent_id": ""})
    assert current.decode(current.encode(RECEIPT)) == RECEIPT  # the current schema keeps it


def test_a_field_missing_from_the_record_is_still_an_error() -> None:
    codec = AvroCodec()
    with pytest.raises(EncodeError):
        codec.encode_record("Receipt", {"key": "acme/refund/inv-1"})


def _fields(receipt: ev.Receipt) -> dict[str, object]:
    return {name: getattr(receipt, name) for name in receipt.__dataclass_fields__}
