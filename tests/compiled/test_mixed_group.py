"""One consumer group, two cores: a pure processor and a compiled one share the intents
while the compiled one is killed (SIGKILL) right after it produced its first batch, and a
compiled one starts again on a fresh folder and takes a share of the rest. Whatever each
core decided, replayed or restored from the other's changelog, the topics hold exactly the
pure core's outputs and every copy of an output is byte-identical, whichever process
wrote it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from ledger_lab.harness.processes import Proc, start_processor
from ledger_stream.config import Settings
from tests.compiled.support import needs_build
from tests.processor.support import (
    QUIET,
    assert_outputs_match_the_model,
    intent_stream,
    kill_all,
    log_lines,
    receipts_for,
    send_over_time,
    wait_exit,
    wait_for,
)

pytestmark = [pytest.mark.timeout(300), needs_build]

def _core_of(proc: Proc) -> str:
    started = log_lines(proc, "processor started")
    assert started, f"no start-up line in {proc.log.name}"
    return "compiled" if '"core": "compiled"' in started[0] else "pure"


def test_a_pure_and_a_compiled_processor_in_one_group(ledger_topics: Settings,
                                                      tmp_path: Path) -> None:
    s = ledger_topics
    events = intent_stream(keys=900, seed=37, conflicts=False)
    guarantee = ("--guarantee", "at-least-once")  # copies from both cores to compare
    pure = start_processor(s, tmp_path / "pure", tmp_path / "pure.log", *guarantee,
                           env={**QUIET, "LEDGER_CORE": "pure"})
    crashing = start_processor(s, tmp_path / "c1", tmp_path / "compiled-1.log", *guarantee,
                               env={**QUIET, "LEDGER_CORE": "compiled",
                                    "LEDGER_FAILPOINT": "processor_after_produce"})
    procs = [pure, crashing]
    half = len(events) // 2
    try:
        send_over_time(s, events[:half], 3.0)
        assert wait_exit(crashing, 90) == -signal.SIGKILL, crashing.tail()
        again = start_processor(s, tmp_path / "c2", tmp_path / "compiled-2.log", *guarantee,
                                env={**QUIET, "LEDGER_CORE": "compiled"})
        procs.append(again)
        # The second half once the compiled processor holds partitions (it decides some).
        wait_for("the compiled processor's partitions",
                 lambda: bool(log_lines(again, "partitions assigned")), 90, procs)
        send_over_time(s, events[half:], 3.0)
        receipts_for(s, {e.event_id for e in events}, timeout_s=120, proc=pure)
        assert [_core_of(p) for p in procs] == ["pure", "compiled", "compiled"]
        assert pure.stop() == 0, pure.tail()
        assert again.stop() == 0, again.tail()
    finally:
        kill_all(procs)
    assert_outputs_match_the_model(s, events, exactly_once=False)
