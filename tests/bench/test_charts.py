"""The bench's charts: each drawn from a small result as a real PNG (valid header, the size
asked for, not blank); one without its data is skipped, not drawn empty."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ledger_lab.bench import charts
from ledger_lab.bench.latency_detail import cdf

pytest.importorskip("matplotlib")  # the dev extra installs it; the charts extra for users

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _bench_report(peers: dict[str, object] | None = None) -> dict[str, object]:
    ledger = [float(ms) for ms in range(5, 105)]
    raw = [ms / 4 for ms in ledger]
    stages = {"windows": 2, "batches": 400, "records": 12_000,
              "mean_ms": {"poll": 1.2, "decide": 3.5, "produce": 0.8, "flush": 6.1,
                          "commit": 4.0, "store": 0.4},
              "share": {"poll": 0.07, "decide": 0.21, "produce": 0.05, "flush": 0.38,
                        "commit": 0.25, "store": 0.02},
              "max_ms": {}, "gc_pauses": 3, "gc_ms": 4.5}
    arms: dict[str, object] = {"latency": {
        "median": {"rate_per_s": 3000.0, "ledger_p50_ms": 55.0, "ledger_p99_ms": 104.0,
                   "raw_p50_ms": 14.0, "raw_p99_ms": 26.0},
        "runs": [{"repetition": 1, "notes": {
            "cdf_ms": {"ledger": cdf(ledger), "raw": cdf(raw)},
            "ledger_batch_stages": stages}}]}}
    if peers is not None:
        arms["peers"] = {"median": peers, "runs": []}
    return {"arms": arms}


CPU = {"records": 10_000, "partitions": 12, "echo_us": 19.0, "floor_us": 40.0,
       "alo": {"us": 83.0, "stages_us": {"decode": 10.0, "validate": 3.0, "decide": 20.0,
                                         "encode": 9.0, "store": 15.0, "produce": 8.0,
                                         "commit": 1.0, "other": 17.0}},
       "eos": {"us": 85.0, "stages_us": {"decode": 10.0, "validate": 3.0, "decide": 20.0,
                                         "encode": 9.0, "store": 15.0, "produce": 9.0,
                                         "commit": 2.0, "other": 17.0}}}
PEERS = {f"{who}_{n}_{kind}_{stat}": value
         for who, scale in (("ledger-stream", 1.0), ("effect-ledger", 2.0), ("dbos_pg", 3.0))
         for n in (1, 8, 64) for kind in ("fresh", "duplicate")
         for stat, value in (("p50_ms", 20 * scale), ("p99_ms", 40 * scale),
                             ("per_s", 500 / scale))}


def assert_png(path: Path, width: int, height: int) -> None:
    """A PNG at least ``width`` x ``height`` (cropped to what is drawn), with ink on it."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    got_width, got_height = struct.unpack(">II", data[16:24])
    assert got_width >= width and got_height >= height
    assert len(data) > 10_000  # axes, labels and lines, not an empty canvas
    from matplotlib import image
    pixels = image.imread(path)
    assert pixels.shape[:2] == (got_height, got_width)  # the header matches the pixels
    assert pixels.std() > 0.05  # not one colour
    assert (pixels[..., :3] < 0.5).mean() > 0.005  # something dark (lines, text) drawn


def test_every_chart_is_drawn_from_a_small_result(tmp_path: Path) -> None:
    report = _bench_report(PEERS)
    written = charts.render(report, tmp_path, "run")
    written += charts.render(CPU, tmp_path, "cpu")
    assert [p.name for p in written] == ["run.latency-cdf.png", "run.batch-stages.png",
                                         "run.peers.png", "cpu.cpu-stages.png"]
    sizes = {"latency-cdf": (1000, 400), "batch-stages": (800, 180),
             "peers": (1400, 400), "cpu-stages": (800, 400)}
    for path in written:
        assert_png(path, *sizes[path.name.split(".")[1]])


def test_a_result_without_a_chart_s_data_draws_nothing_of_it(tmp_path: Path) -> None:
    assert charts.render({"arms": {"ledger-alo": {"median": {}, "runs": []}}}, tmp_path,
                         "x") == []
    odd_peers = {"who_knows": 1.0, "x_8_fresh_p50_ms": "fast", "y_8_fresh_per_s": True}
    assert charts.peer_figures(_bench_report(odd_peers)) == {}
    assert [p.name for p in charts.render(_bench_report(odd_peers), tmp_path, "y")] == [
        "y.latency-cdf.png", "y.batch-stages.png"]
    assert charts.peer_figures({"peers": {"a-b_64_duplicate_p99_ms": 3}}) == {
        ("a-b", 64, "duplicate", "p99_ms"): 3.0}


def test_the_command_draws_beside_the_json_or_into_out(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    result = tmp_path / "cpu-run.json"
    result.write_text(json.dumps(CPU))
    assert charts.main([str(result)]) == 0
    assert (tmp_path / "cpu-run.cpu-stages.png").exists()
    assert charts.main([str(result), "--out", str(tmp_path / "pics")]) == 0
    assert_png(tmp_path / "pics" / "cpu-run.cpu-stages.png", 800, 400)
    assert "cpu-run.cpu-stages.png" in capsys.readouterr().out


def test_the_latency_quantiles_are_nearest_rank() -> None:
    points = dict((q, ms) for q, ms in cdf([float(v) for v in range(1, 1001)]))
    assert points[0.5] == 500.0 and points[0.99] == 990.0 and points[0.999] == 999.0
    assert points[1.0] == 1000.0
    assert cdf([]) == []


def test_bench_cpu_with_charts_writes_the_json_and_its_chart(tmp_path: Path) -> None:
    from ledger_stream.cli.main import main

    folder = tmp_path / "charts"
    assert main(["bench", "--cpu", "--intents", "200", "--repeat", "1", "--partitions", "2",
                 "--charts", str(folder)]) == 0
    assert json.loads((folder / "cpu.json").read_text())["alo"]["stages_us"]
    assert_png(folder / "cpu.cpu-stages.png", 800, 400)


def test_the_processor_s_stage_lines_are_summed_over_its_windows(tmp_path: Path) -> None:
    from ledger_lab.bench.latency_detail import summed

    log = tmp_path / "processor.log"
    window = {"msg": "batch stages", "batches": 10, "records": 100, "gc_pauses": 1,
              "gc_ms": 0.5, "mean_ms": {"poll": 1.0, "flush": 3.0},
              "max_ms": {"poll": 2.0, "flush": 9.0}}
    later = {**window, "batches": 30, "records": 900, "mean_ms": {"poll": 1.0, "flush": 1.0},
             "max_ms": {"poll": 5.0, "flush": 4.0}}
    log.write_text("\n".join([json.dumps({"msg": "processor started"}), json.dumps(window),
                              '{"msg": "batch stages", "batc', json.dumps(later)]) + "\n")
    found = summed(log)
    assert found is not None
    assert (found["windows"], found["batches"], found["records"]) == (2, 40, 1000)
    assert found["mean_ms"] == {"poll": 1.0, "flush": 1.5}
    assert found["share"] == {"poll": 0.4, "flush": 0.6}
    assert found["max_ms"] == {"poll": 5.0, "flush": 9.0}
    assert (found["gc_pauses"], found["gc_ms"]) == (2, 1.0)
    assert summed(tmp_path / "absent.log") is None


@pytest.mark.parametrize("text", [
    "[1, 2]",  # not an object
    '{"arms": []}',
    '{"arms": {"latency": {"runs": [{"notes": {"cdf_ms": {"ledger": [[0.5]]}}}]}}}',
    '{"arms": {"ledger-alo": {"runs": [{"notes": {"batch_stages": '
    '{"batches": 2, "mean_ms": {"poll": 1.0}}}}]}}}',  # no records
    '{"alo": {"stages_us": {"decide": 1.0}, "us": "fast"}}',
])
def test_a_result_that_is_not_a_bench_result_is_named_not_a_traceback(
        tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = tmp_path / "odd.json"
    result.write_text(text)
    assert charts.main([str(result)]) == 2
    assert f"{result}: not a bench result" in capsys.readouterr().err
