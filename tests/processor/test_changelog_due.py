"""Every key's row in the changelog carries its deadline basis beside it (``ledger.due``),
the basis of the state the row holds: restore indexes timers from it without decoding rows.
On the real broker, as a processor writes it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.domain.deadlines import deadline_basis
from ledger_stream.kafka.layout import LAYOUT_KEY
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.processor.changelog import CLOCK_KEY, CONTAINMENT_KEY, DUE, parse_due
from ledger_stream.state import decode_row
from tests.factories import claim, intent
from tests.processor.support import Raw, read_raw, receipts_for

pytestmark = pytest.mark.timeout(180)


def test_every_row_the_processor_writes_carries_the_basis_of_its_state(
        ledger_topics: Settings, tmp_path: Path) -> None:
    s = ledger_topics
    assert s.kafka_bootstrap
    fresh = [intent(key=f"acme/pay/due-{i}", args={"amount": i}) for i in range(12)]
    # A claim moves four keys on to DISPATCHED (another kind of deadline); a duplicate
    # changes nothing. Fenced, as a connector holding the pre-grant claims (a plain claim
    # would be held until the pre-grant's end).
    producer = EventProducer(s, s.kafka_bootstrap)
    for event in fresh:
        producer.send("intents", event)
    producer.flush()
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log")
    try:
        receipts_for(s, {e.event_id for e in fresh}, timeout_s=60, proc=proc)
        for event in fresh[:4]:
            producer.send("attempts", claim(key=event.key, attempt=1, fenced=True))
        producer.flush()
        deadline = time.monotonic() + 60
        while len(_rows(s)) < len(fresh) + 4:  # a row per fresh key, then per claimed key
            assert time.monotonic() < deadline, proc.tail()
            time.sleep(0.5)
    finally:
        producer.close()
        assert proc.stop() == 0, proc.tail()

    rows = _rows(s)
    assert {r.key for r in rows} == {e.key.encode() for e in fresh}
    kinds = set()
    for row in rows:
        headers = dict(row.headers)
        assert row.value is not None
        basis = deadline_basis(decode_row(row.value))
        assert parse_due(headers[DUE]) == basis, (row.key, headers)
        kinds.add(basis[0] if basis else None)
    assert len(kinds) >= 2, kinds  # reserved (stall) and dispatched (lease) rows both seen


def _rows(s: Settings) -> list[Raw]:
    """The changelog's key rows (not the clock, the containment row or the layout)."""
    return [r for r in read_raw(s.kafka_bootstrap or "", s.topic("changelog"))
            if r.key not in (CLOCK_KEY, CONTAINMENT_KEY.encode(), LAYOUT_KEY)]
