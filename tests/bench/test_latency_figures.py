"""The latency arm's percentiles: the records due during the warm-up are left out of them
(the child's start, not its latency), and the whole run's p99 is kept beside."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ledger_lab.bench.arms import latency
from ledger_lab.bench.arms.latency import latency_figures
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.options import BenchOptions


def test_the_warm_up_is_left_out_of_the_percentiles_and_kept_in_the_whole_p99() -> None:
    start = [(i / 100, 900.0) for i in range(100)]  # the first second: a queue at start
    steady = [(1 + i / 100, float(10 + i % 10)) for i in range(900)]  # 10..19 ms
    found = latency_figures("ledger", start + steady, 1000, warm_up_s=1.0)
    assert found["ledger_p50_ms"] == 14.0
    assert found["ledger_p99_ms"] == 19.0
    assert found["ledger_p99_whole_ms"] == 900.0
    assert found["ledger_answered"] == 1000.0 and found["ledger_sent"] == 1000.0
    assert found["ledger_measured"] == 900.0
    everything = latency_figures("ledger", start + steady, 1000, warm_up_s=0.0)
    assert everything["ledger_p99_ms"] == everything["ledger_p99_whole_ms"] == 900.0


def test_no_answer_after_the_warm_up_is_an_error() -> None:
    with pytest.raises(BenchError, match="warm-up"):
        latency_figures("raw", [(0.1, 5.0)], 1, warm_up_s=1.0)


def test_a_fixed_latency_rate_reaches_the_arm_and_skips_the_throughput_run(monkeypatch) -> None:
    """``--latency-rate`` (a target's rate, e.g. 6,000/s) replaces half the ledger's
    throughput; without it the arm learns that throughput (here: from the ledger arm's)."""
    fixed = BenchOptions(arms="latency", latency_rate=6000).sized()[1]
    assert fixed.latency_rate == 6000
    assert BenchOptions(arms="latency").sized()[1].latency_rate is None
    monkeypatch.setattr(latency.LedgerArm, "run", lambda *a: pytest.fail("measured"))
    assert latency.LatencyArm().rate(SimpleNamespace(sizes=fixed, shared={})) == 6000
    learnt = SimpleNamespace(sizes=BenchOptions().sized()[1],
                             shared={"ledger-max-rate": 14_000.0})
    assert latency.LatencyArm().rate(learnt) == 7_000.0
