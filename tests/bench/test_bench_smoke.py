"""The benchmark command end to end at smoke size, on the session's broker: every arm runs
and reports positive figures, and the report carries every ratio. No timing assertions."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ledger_lab.bench.options import ARM_NAMES
from ledger_lab.bench.report import TARGETS, THROUGHPUT_RATIOS
from ledger_lab.cli import bench_cmd

EXPECTED_ARMS = {"bytes-echo", "avro-echo", "io-floor", "ledger-alo", "ledger-eos", "pg-naive",
                 "pg-tuned", "latency", "growth", "restore", "scale-out", "sdk", "connector",
                 "peers"}


def _bench(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ledger-stream")
    bench_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", *argv])
    return int(args.handler(args))


def _positive_numbers(figures: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in figures.items()
            if k not in ("repetition", "notes") and not (isinstance(v, float | int) and v > 0)}


@pytest.mark.timeout(300)
def test_smoke_run_reports_every_arm_and_ratio(kafka_bootstrap: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "bench.json"
    # As a user runs it: no approver key in the environment (the suite sets one).
    monkeypatch.delenv("LEDGER_APPROVAL_SECRET", raising=False)
    monkeypatch.delenv("LEDGER_APPROVAL_PUBLIC_KEYS", raising=False)
    monkeypatch.delenv("LEDGER_DEV_MODE", raising=False)

    status = _bench(["--smoke", "--bootstrap", kafka_bootstrap, "--out", str(out),
                     "--charts"])

    assert status == 0
    report = json.loads(out.read_text())
    assert set(report["arms"]) == EXPECTED_ARMS
    for name, arm in report["arms"].items():
        assert arm["runs"], name
        assert arm["peak_rss_mb"] > 0, name
        assert not _positive_numbers(arm["median"]), (name, arm["median"])
        for run in arm["runs"]:
            assert not _positive_numbers(run), (name, run)
    expected_ratios = ({name for name, *_ in THROUGHPUT_RATIOS} | {name for name, *_ in TARGETS}
                       | {"scale_out_speedup_2", "scale_out_speedup_3",
                          "latency_p99_whole_run_ledger_vs_raw"})
    assert set(report["ratios"]) == expected_ratios
    assert not _positive_numbers(report["ratios"]), report["ratios"]
    assert {row["ratio"] for row in report["targets"]} == {name for name, *_ in TARGETS}
    assert report["machine"]["cpu_count"] >= 1
    assert report["workload"]["intents"] == 2_000
    assert report["arms"]["sdk"]["median"]["duplicate_cached_p50_ms"] > 0  # the receipt cache
    printed = capsys.readouterr().out
    assert "ledger_alo_vs_avro_echo" in printed
    # What the charts are drawn from: each path's quantiles, the processors' stage lines.
    notes = report["arms"]["latency"]["runs"][0]["notes"]
    assert {name: bool(points) for name, points in notes["cdf_ms"].items()} == {
        "ledger": True, "raw": True}
    assert notes["ledger_batch_stages"]["batches"] >= 1
    assert report["arms"]["ledger-alo"]["runs"][0]["notes"]["batch_stages"]["records"] >= 1
    for chart in ("latency-cdf", "batch-stages"):  # beside the JSON
        assert (tmp_path / f"bench.{chart}.png").read_bytes()[:4] == b"\x89PNG", chart


def test_unknown_arm_is_a_user_error() -> None:
    from ledger_stream.cli.common import CliError

    with pytest.raises(CliError, match="unknown arm"):
        _bench(["--arms", "ledger,nope"])
    assert "latency" in ARM_NAMES
