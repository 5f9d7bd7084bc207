"""The pre-grant as the processor process writes it, on the real broker: the first Dispatch
of a key carries a lease only from an exactly-once processor (the setting's default). An
at-least-once processor's carries none, whatever the setting says, and neither does one
writing an older release's schemas (the first pass of an upgrade), whose Dispatch has no
field for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from tests.factories import intent
from tests.processor.support import read_all, receipts_for

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize(("guarantee", "writes", "pregrants"), [
    ("at-least-once", "", False), ("exactly-once", "", True),
    ("exactly-once", "0.1.0", False)])
def test_only_an_exactly_once_processor_pre_grants_the_first_dispatch(
        ledger_topics: Settings, tmp_path: Path, guarantee: str, writes: str,
        pregrants: bool):
    s = ledger_topics
    env = {"LEDGER_PREGRANT_LEASE_MS": "20000", **({"LEDGER_WRITE_SCHEMAS": writes}
                                                   if writes else {})}
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log",
                           "--guarantee", guarantee, env=env)
    try:
        first = intent(key="acme/refund/pregrant")
        producer = EventProducer(s, s.kafka_bootstrap)
        producer.send("intents", first)
        producer.flush()
        receipts_for(s, {first.event_id}, proc=proc)
    finally:
        assert proc.stop() == 0, proc.tail()
    (dispatch,) = [d for d in read_all(s, "dispatch") if isinstance(d, ev.Dispatch)]
    # Dispatch.at_ms: the broker time the intent was decided at, the pre-grant's start.
    assert dispatch.lease_until_ms == (dispatch.at_ms + 20_000 if pregrants else 0)
    assert ("pre-grant 20000 ms" if pregrants else "pre-grant off") in proc.tail(400)
