"""The codec that reads ledger topics is public: ``from ledger_stream import AvroCodec``
decodes what the ledger writes, and refuses what it did not write with a typed error."""

from __future__ import annotations

import pytest

import ledger_stream


def test_the_public_codec_reads_what_the_ledger_writes():
    alert = ledger_stream.Alert("a1", "acme/refund/inv-1", ledger_stream.AlertKind.STALLED,
                                "e1", "no claim within 300000 ms", 1_796_000_000_000)
    codec = ledger_stream.AvroCodec()
    assert codec.decode(codec.encode(alert)) == alert
    with pytest.raises(ledger_stream.DecodeError):
        codec.decode(b"not a ledger event")
