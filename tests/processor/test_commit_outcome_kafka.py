"""A batch abandoned with its producer replaced while its commit's outcome is unknown, on a
real broker, exactly once. A failpoint makes the checkpoint give up on the third batch as
if its commit had stuck, either right after ``commit_transaction`` returned (the commit
went through) or before the commit (it never happens). Either way each output appears once
on the topics as a read_committed reader sees them, the outputs are the pure core's, and
the processor goes on deciding records sent after the failure."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.kafka.producer import EventProducer
from tests.factories import intent
from tests.processor.support import (
    QUIET,
    assert_outputs_match_the_model,
    intent_stream,
    kill_all,
    log_lines,
    receipts_for,
    send_over_time,
    wait_for,
)

pytestmark = pytest.mark.timeout(300)

KEPT = "committed after all"


@pytest.mark.parametrize(("point", "kept"), [
    ("processor_commit_unknown_after", True), ("processor_commit_unknown_before", False)])
def test_a_batch_of_unknown_outcome_is_written_once(ledger_topics: Settings, tmp_path: Path,
                                                    point: str, kept: bool) -> None:
    s = ledger_topics
    events = intent_stream(keys=300, seed=7)
    stream = threading.Thread(target=send_over_time, args=(s, events, 4.0), daemon=True)
    stream.start()
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log",
                           "--guarantee", "exactly-once",
                           env={**QUIET, "LEDGER_FAILPOINT": f"{point}@3"})
    try:
        wait_for("the batch abandoned by the failpoint",
                 lambda: bool(log_lines(proc, "failpoint: commit")), 90, [proc])
        stream.join(60)
        # Records sent after the failure: the processor goes on deciding.
        late = [intent(key=f"acme/pay/late{i}", args={"amount": i}) for i in range(40)]
        producer = EventProducer(s, s.kafka_bootstrap)
        for event in late:
            producer.send("intents", event)
        producer.flush()
        producer.close()
        events += late
        receipts_for(s, {e.event_id for e in events}, timeout_s=120, proc=proc)
    finally:
        assert proc.stop() == 0, proc.tail()
        kill_all([proc])
    assert_outputs_match_the_model(s, events, exactly_once=True)
    # The processor learnt the outcome from the group (a commit that never happened: the
    # batch is decided again).
    assert bool(log_lines(proc, KEPT)) == kept, proc.tail()
