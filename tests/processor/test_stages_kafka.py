"""The stage log of a real processor on the real broker: every stage of its committed
batches timed, as histograms on /metrics and as the ``batch stages`` line it logs when it
stops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.processor.stages import STAGES
from tests.factories import intent
from tests.processor.support import log_lines, receipts_for, scrape, served_metrics_port

pytestmark = pytest.mark.timeout(240)


def test_a_processor_logs_and_serves_where_its_batches_time_went(ledger_topics: Settings,
                                                                   tmp_path: Path) -> None:
    s = ledger_topics
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log", metrics_port=0)
    try:
        port = served_metrics_port(proc)
        producer = EventProducer(s, s.kafka_bootstrap)
        sent = [intent(key=f"acme/refund/S{i}") for i in range(40)]
        for event in sent:
            producer.send("intents", event)
        producer.flush()
        receipts_for(s, {e.event_id for e in sent}, proc=proc)
        served = scrape(port)
    finally:
        assert proc.stop() == 0
    for stage in STAGES:
        count = served[f'ledger_batch_stage_seconds_count{{stage="{stage}"}}']
        assert count >= 1, stage
        assert 0 <= served[f'ledger_batch_stage_seconds_sum{{stage="{stage}"}}'] < 60 * count
    assert served['ledger_batch_stage_seconds_sum{stage="flush"}'] > 0

    lines = [json.loads(line) for line in log_lines(proc, '"batch stages"')]
    assert lines, proc.tail()
    records = sum(line["records"] for line in lines)
    assert records >= len(sent)  # every intent, in some committed batch
    last = lines[-1]
    assert set(last["mean_ms"]) == set(STAGES)
    assert 0.99 <= sum(last["share"].values()) <= 1.01
    # A batch that reached the brokers waited for them: flush and commit take time.
    assert last["mean_ms"]["flush"] > 0 and last["mean_ms"]["commit"] > 0
    assert all(0 <= v <= last["wall_ms"] for v in last["max_ms"].values())
    assert last["gc_pauses"] >= 0 and last["gc_ms"] >= 0
