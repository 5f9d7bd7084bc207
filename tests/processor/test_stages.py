"""Where a batch's time goes: the stage clock, the window it is aggregated in, the log line
and the histograms, and the collector's pauses counted per batch."""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from ledger_stream.processor import collector, stages
from ledger_stream.processor.stages import STAGES, BatchClock, StageLog, Window


class Ticking:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _clock(**seconds: float) -> BatchClock:
    clock = BatchClock()
    clock.start()
    clock.seconds.update(seconds)
    return clock


def test_a_window_sums_means_shares_longest_and_the_slowest_batch() -> None:
    window = Window()
    window.add({**dict.fromkeys(STAGES, 0.0), "poll": 0.001, "flush": 0.003}, 10, (0, 0.0))
    window.add({**dict.fromkeys(STAGES, 0.0), "poll": 0.003, "flush": 0.009,
                "decide": 0.004}, 30, (2, 0.002))
    fields = window.fields()
    assert (fields["batches"], fields["records"]) == (2, 40)
    assert fields["wall_ms"] == 20.0
    assert fields["mean_ms"] == {**dict.fromkeys(STAGES, 0.0), "poll": 2.0, "flush": 6.0,
                                 "decide": 2.0}
    assert fields["share"] == {**dict.fromkeys(STAGES, 0.0), "poll": 0.2, "flush": 0.6,
                               "decide": 0.2}
    assert fields["max_ms"]["flush"] == 9.0
    assert fields["slowest_batch_ms"] == {**dict.fromkeys(STAGES, 0.0), "poll": 3.0,
                                          "flush": 9.0, "decide": 4.0}
    assert (fields["gc_pauses"], fields["gc_ms"], fields["gc_batch_max_ms"]) == (2, 2.0, 2.0)


def test_a_lap_gives_the_time_since_the_previous_one_to_its_stage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([1.0, 1.5, 1.75, 2.0, 3.0])
    monkeypatch.setattr(stages.time, "perf_counter", lambda: next(ticks))
    clock = BatchClock()  # 1.0
    clock.start()  # 1.5
    clock.lap("poll")  # 1.75
    clock.lap("decide")  # 2.0
    clock.lap("decide")  # 3.0: a second lap of one stage adds to it
    assert clock.seconds == {**dict.fromkeys(STAGES, 0.0), "poll": 0.25, "decide": 1.25}
    monkeypatch.setattr(stages.time, "perf_counter", lambda: 9.0)
    clock.start()
    assert clock.seconds == dict.fromkeys(STAGES, 0.0)


def test_the_log_writes_one_line_per_window_and_observes_every_batch(
        caplog: pytest.LogCaptureFixture) -> None:
    now = Ticking()
    log = StageLog(every_s=10.0, clock=now)
    before = REGISTRY.get_sample_value("ledger_batch_stage_seconds_count",
                                       {"stage": "commit"}) or 0.0
    caplog.set_level(logging.INFO, logger=stages.__name__)
    for second in range(10):  # ten batches inside one window: no line yet
        now.now = float(second)
        log.committed(_clock(commit=0.002, poll=0.001), 5)
    assert not [r for r in caplog.records if r.getMessage() == "batch stages"]
    now.now = 10.0
    log.committed(_clock(commit=0.004, poll=0.001), 5)  # the window is 10 s old
    lines = [r for r in caplog.records if r.getMessage() == "batch stages"]
    assert len(lines) == 1
    fields = lines[0].fields  # type: ignore[attr-defined]
    assert (fields["batches"], fields["records"]) == (11, 55)
    assert fields["max_ms"]["commit"] == 4.0
    assert json.dumps(fields)  # a JSON log line
    assert REGISTRY.get_sample_value("ledger_batch_stage_seconds_count",
                                     {"stage": "commit"}) == before + 11
    assert log.flush() is None  # the new window is empty: nothing to log


@pytest.fixture
def tuned() -> Iterator[None]:
    threshold = gc.get_threshold()
    collector.tune()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    gc.callbacks.remove(collector._measure)


@pytest.mark.usefixtures("tuned")
def test_a_collection_during_a_batch_is_counted_as_its_pause() -> None:
    clock = BatchClock()
    clock.start()
    assert clock.gc_since_start() == (0, 0.0)
    gc.collect(0)
    gc.collect(1)
    count, seconds = clock.gc_since_start()
    assert count == 2 and 0 < seconds < 1
    window = Window()
    window.add(clock.seconds, 1, clock.gc_since_start())
    assert window.fields()["gc_pauses"] == 2
