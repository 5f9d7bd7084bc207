"""A SIGKILL at each step of the checkpoint, under a stream of intents, at least once and
exactly once. The processor dies at the failpoint on its first batch, restarts on the same
state folder (and dies there again), then on a fresh folder (dies again), and a last
restart on that folder finishes the stream. Then, on the topics as a read_committed reader
sees them: the distinct outputs are exactly the pure core's (a crash-free run's), every copy
of an output is byte-identical, exactly once shows no output twice, and every key has one
dispatch id."""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from tests.factories import intent
from tests.processor.support import (
    assert_outputs_match_the_model,
    kill_all,
    receipts_for,
    wait_exit,
)

pytestmark = pytest.mark.timeout(300)

POINTS = ("processor_after_produce", "processor_after_flush", "processor_after_commit")
# No Ticks: with intents alone, a partition's records are decided in one order on every
# replay, so the replayed outputs are byte-identical (Ticks on attempts-p could interleave
# with intents-p differently after a restart and move the clock at another record).
QUIET = {"LEDGER_TICK_INTERVAL_MS": "600000", "LEDGER_MAX_BATCH": "150"}


def _stream(keys: int, seed: int) -> list[ev.Intent]:
    """Intents in a random order: one per key, duplicates (same arguments) for a quarter
    of the keys and conflicts (other arguments) for a twentieth."""
    rng = random.Random(seed)
    events = [intent(key=f"acme/pay/k{i}", args={"amount": i}) for i in range(keys)]
    events += [intent(key=f"acme/pay/k{i}", args={"amount": i})
               for i in rng.sample(range(keys), keys // 4)]
    events += [intent(key=f"acme/pay/k{i}", args={"amount": -1})
               for i in rng.sample(range(keys), keys // 20)]
    rng.shuffle(events)
    return events


def _send_over_time(settings: Settings, events: list[ev.Intent], seconds: float) -> None:
    producer = EventProducer(settings, settings.kafka_bootstrap)
    chunk = max(1, len(events) // int(seconds * 10))
    for start in range(0, len(events), chunk):
        for event in events[start:start + chunk]:
            producer.send("intents", event)
        producer.flush()
        time.sleep(0.1)
    producer.close()


# Exactly-once at the two points where its transaction matters: open (produced and flushed,
# not committed: aborted on restart) and committed (the store not yet written). A crash
# after produce leaves the same open transaction as one after flush, less of it delivered.
CASES = [(point, "at-least-once") for point in POINTS] + [
    ("processor_after_flush", "exactly-once"), ("processor_after_commit", "exactly-once")]


@pytest.mark.parametrize(("point", "guarantee"), CASES)
def test_sigkill_at_each_checkpoint_step(ledger_topics: Settings, tmp_path: Path,
                                         point: str, guarantee: str) -> None:
    s = ledger_topics
    events = _stream(keys=900, seed=POINTS.index(point))
    stream = threading.Thread(target=_send_over_time, args=(s, events, 5.0), daemon=True)
    stream.start()
    crashing = {**QUIET, "LEDGER_FAILPOINT": point}
    # Twice on one state folder (the second start reuses a local store the crash left
    # behind or ahead of the changelog), then the last run on a fresh folder (restored from
    # the changelog alone).
    runs = [("state-1", crashing), ("state-1", crashing)]
    for n, (folder, env) in enumerate(runs, 1):
        proc = start_processor(s, tmp_path / folder, tmp_path / f"crash-{n}.log",
                               "--guarantee", guarantee, env=env)
        try:
            assert wait_exit(proc, 90) == -signal.SIGKILL, proc.tail()
        finally:
            kill_all([proc])
    last = start_processor(s, tmp_path / "state-2", tmp_path / "last.log",
                           "--guarantee", guarantee, env=QUIET)
    try:
        stream.join(60)
        receipts_for(s, {e.event_id for e in events}, timeout_s=120, proc=last)
    finally:
        assert last.stop() == 0, last.tail()
    assert_outputs_match_the_model(s, events, exactly_once=guarantee == "exactly-once")
