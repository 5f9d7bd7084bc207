"""A send that races ``EventProducer.close`` (no broker): once the client is released, a
send or a delivery says the producer is closed, never an AttributeError from inside it."""

from __future__ import annotations

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.serde import AvroCodec
from tests.sdk.settled import intent

NOWHERE = "127.0.0.1:1"


def test_a_send_after_close_says_the_producer_is_closed() -> None:
    settings = Settings(kafka_bootstrap=NOWHERE)
    producer = EventProducer(settings, NOWHERE, AvroCodec(), acks="all")
    producer.close(1.0)  # nothing sent: the flush returns at once and the client is released
    event: ev.Intent = intent(1)
    with pytest.raises(RuntimeError, match="the producer is closed"):
        producer.send_raw("intents", b"k", b"v")
    with pytest.raises(RuntimeError, match="the producer is closed"):
        producer.deliver("intents", event, timeout_s=1.0)
    producer.close()  # again: nothing to do
