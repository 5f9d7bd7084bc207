"""Inputs whose outputs Kafka would refuse, on the real broker: the processor dead-letters
the input and goes on; before the size check, the produce of the batch's changelog row
failed, the batch was abandoned, and every retry met the same record (stalled for good)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.reader import read_topic
from tests.factories import claim, intent, outcome
from tests.processor.support import log_lines, read_all, receipts_for, wait_for

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_an_outcome_whose_row_kafka_would_refuse_is_dead_lettered_and_the_rest_goes_on(
        ledger_topics: Settings, tmp_path: Path, guarantee: str) -> None:
    s = ledger_topics
    assert s.kafka_bootstrap is not None
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log",
                           "--guarantee", guarantee)
    try:
        producer = EventProducer(s, s.kafka_bootstrap)
        first = intent(key="acme/refund/A")
        producer.send("intents", first)
        producer.flush()
        receipts_for(s, {first.event_id}, proc=proc)
        wait_for("A's dispatch", lambda: any(
            isinstance(d, ev.Dispatch) and d.key == first.key
            for d in read_all(s, "dispatch")), 60, [proc])
        # A 600 KB external id (a connector's outcome, under the producer's limit): the
        # key's row holds it twice (its external id and its attempt history), 1.2 MB.
        huge = outcome(ev.OutcomeStatus.SUCCEEDED, key=first.key, external_id="x" * 600_000)
        producer.send("attempts", claim(key=first.key))
        producer.send("attempts", huge)
        # A key of the same partition: the one a stalled batch would hold back.
        home = partition_for(first.key, s.partitions)
        after = intent(key=next(key for key in (f"acme/refund/B{i}" for i in range(1000))
                                if partition_for(key, s.partitions) == home))
        producer.send("intents", after)
        producer.flush()

        receipts_for(s, {after.event_id}, timeout_s=60, proc=proc)
        letters = read_topic(s.kafka_bootstrap, s.topic("dlq"), until=lambda r: len(r) >= 1,
                             timeout_s=30)
        assert len(letters) == 1
        assert "state row" in letters[0].reason and "1,000,000" in letters[0].reason
        alerts = read_topic(s.kafka_bootstrap, s.topic("alerts"),
                            until=lambda r: any(a.kind is ev.AlertKind.POISON_INPUT for a in r),
                            timeout_s=30)
        assert any(a.kind is ev.AlertKind.POISON_INPUT for a in alerts)
        assert proc.alive()
        assert not log_lines(proc, "batch abandoned")
    finally:
        proc.stop()
