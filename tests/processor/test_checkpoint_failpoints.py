"""A SIGKILL at each step of the checkpoint, under a stream of intents, at least once and
exactly once. The processor dies at the failpoint on its first batch, restarts on the same
state folder (and dies there again), then on a fresh folder (dies again), and a last
restart on that folder finishes the stream. Then, on the topics as a read_committed reader
sees them: the distinct outputs are exactly the pure core's (a crash-free run's), every copy
of an output is byte-identical, exactly once shows no output twice, and every key has one
dispatch id."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from tests.processor.support import (
    QUIET,
    assert_outputs_match_the_model,
    intent_stream,
    receipts_for,
    run_to_the_failpoint,
    streaming,
)

pytestmark = pytest.mark.timeout(300)

POINTS = ("processor_after_produce", "processor_after_flush", "processor_after_commit")


# Exactly-once at the two points where its transaction matters: open (produced and flushed,
# not committed: aborted on restart) and committed (the store not yet written). A crash
# after produce leaves the same open transaction as one after flush, less of it delivered.
CASES = [(point, "at-least-once") for point in POINTS] + [
    ("processor_after_flush", "exactly-once"), ("processor_after_commit", "exactly-once")]


@pytest.mark.parametrize(("point", "guarantee"), CASES)
def test_sigkill_at_each_checkpoint_step(ledger_topics: Settings, tmp_path: Path,
                                         point: str, guarantee: str) -> None:
    s = ledger_topics
    events = intent_stream(keys=900, seed=POINTS.index(point))
    stream = streaming(s, events, 5.0)
    # Twice on one state folder (the second start reuses a local store the crash left
    # behind or ahead of the changelog), then the last run on a fresh folder (restored from
    # the changelog alone).
    for n in (1, 2):
        run_to_the_failpoint(s, tmp_path / "state-1", tmp_path / f"crash-{n}.log", point,
                             "--guarantee", guarantee)
    last = start_processor(s, tmp_path / "state-2", tmp_path / "last.log",
                           "--guarantee", guarantee, env=QUIET)
    try:
        stream.join(60)
        receipts_for(s, {e.event_id for e in events}, timeout_s=120, proc=last)
    finally:
        assert last.stop() == 0, last.tail()
    assert_outputs_match_the_model(s, events, exactly_once=guarantee == "exactly-once")
