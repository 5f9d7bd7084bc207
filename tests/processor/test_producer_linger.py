"""The processor's producer sends a batch's records without lingering: each batch ends in
a flush (and, exactly once, a transaction's commit) that waits for them, and librdkafka's
flush does not send lingering records at once (docs/results/submit-2026-12-06.md)."""

from __future__ import annotations

import pytest

from ledger_stream.processor.clients import producer_settings


@pytest.mark.parametrize("transactional", [None, "ledger-processor.p-1"])
def test_the_processor_producer_does_not_linger(transactional: str | None) -> None:
    config = producer_settings("127.0.0.1:9092", transactional)
    assert config["linger.ms"] == 0
    assert config["enable.idempotence"] is True and config["acks"] == "all"
