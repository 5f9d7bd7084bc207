"""The benchmark's report: machine facts, per-arm figures (every run and the median), the
ratios the issue's targets are stated in, and a plain-text table of them."""

from __future__ import annotations

import os
import platform
import statistics
from dataclasses import asdict
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from ledger_lab.bench.context import ArmResult, Sizes
from ledger_lab.bench.options import BenchOptions
from ledger_lab.bench.workload import Workload

# (ratio name, numerator arm, figure, denominator arm, figure)
THROUGHPUT_RATIOS = [
    (f"{led}_vs_{base.replace('-', '_')}", f"ledger-{led[-3:]}", "decisions_per_s", base, fig)
    for led in ("ledger_alo", "ledger_eos")
    for base, fig in (("avro-echo", "records_per_s"), ("bytes-echo", "records_per_s"),
                      ("io-floor", "records_per_s"),
                      ("pg-naive", "claims_per_s"), ("pg-tuned", "claims_per_s"))
] + [
    # The library calls of a decision with no decision, against the echo: the most any
    # processor of this design (Python over confluent-kafka, fastavro, rocksdict) can reach.
    ("io_floor_vs_avro_echo", "io-floor", "records_per_s", "avro-echo", "records_per_s"),
]
# (ratio, comparison, bound): the targets (2 cores, broker on the same machine)
TARGETS = [
    ("ledger_alo_vs_avro_echo", ">=", 0.5), ("ledger_eos_vs_avro_echo", ">=", 0.45),
    ("ledger_alo_vs_pg_naive", ">=", 10.0), ("ledger_alo_vs_pg_tuned", ">=", 1.0),
    ("latency_p99_ledger_vs_raw", "<=", 4.0), ("growth_cost_largest_vs_smallest", "<=", 1.5),
    ("restore_keys_per_s", ">=", 100_000.0),
    ("sdk_duplicate_p50_vs_raw", "<=", 3.0), ("sdk_duplicate_p99_vs_raw", "<=", 6.0),
    # fresh submit p50 over its budget: the target's call time + 4 raw round trips
    ("sdk_fresh_p50_vs_budget", "<=", 1.0),
    ("sdk_status_view_p99_ms_at_largest", "<=", 20.0),
    ("connector_payments_per_s", ">=", 500.0),
]
PRIMARY = {"records_per_s": "rec/s", "decisions_per_s": "dec/s", "claims_per_s": "claims/s",
           "ledger_p99_ms": "ms p99", "keys_per_s": "keys/s",
           "decisions_per_s_3": "dec/s, 3 procs", "duplicate_p50_ms": "ms dup p50",
           "payments_per_s": "payments/s"}


def machine(kafka: str, postgresql: str | None, loadavg_before: str) -> dict[str, Any]:
    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown")
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    mem_kib = next((int(line.split()[1]) for line in meminfo.splitlines()
                    if line.startswith("MemTotal:")), 0)
    return {
        "cpu_count": os.cpu_count(), "cpu_model": model,
        "memory_gib": round(mem_kib / 1024**2, 1), "platform": platform.platform(),
        "python": platform.python_version(), "kafka": kafka, "postgresql": postgresql,
        "confluent_kafka": version("confluent-kafka"), "rocksdict": version("rocksdict"),
        "fastavro": version("fastavro"), "psycopg": version("psycopg"),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg_before": loadavg_before, "loadavg_after": loadavg(),
    }


def loadavg() -> str:
    """Load average (1, 5, 15 min) when the report is built: other work on the machine
    shows here, and on two cores it moves every figure."""
    path = Path("/proc/loadavg")
    return " ".join(path.read_text().split()[:3]) if path.exists() else "unknown"


def summarise(results: list[ArmResult]) -> dict[str, Any]:
    arms: dict[str, Any] = {}
    for result in results:
        entry = arms.setdefault(result.arm, {"runs": [], "median": {}, "peak_rss_mb": 0.0})
        entry["runs"].append({"repetition": result.repetition, **result.figures,
                              "peak_rss_mb": result.peak_rss_mb, "notes": result.notes})
        entry["peak_rss_mb"] = max(entry["peak_rss_mb"], result.peak_rss_mb)
    for entry in arms.values():
        names = dict.fromkeys(k for run in entry["runs"] for k in run
                              if k not in ("repetition", "notes"))
        entry["median"] = {n: statistics.median(run[n] for run in entry["runs"] if n in run)
                           for n in names}
    return arms


def ratios(arms: dict[str, Any]) -> dict[str, float | None]:
    def fig(arm: str, name: str) -> float | None:
        value = arms.get(arm, {}).get("median", {}).get(name)
        return float(value) if value else None

    def div(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    found = {name: div(fig(a, fa), fig(b, fb)) for name, a, fa, b, fb in THROUGHPUT_RATIOS}
    # After the arm's warm-up (the processor's start); the whole run's beside, no target.
    found["latency_p99_ledger_vs_raw"] = div(fig("latency", "ledger_p99_ms"),
                                             fig("latency", "raw_p99_ms"))
    found["latency_p99_whole_run_ledger_vs_raw"] = div(fig("latency", "ledger_p99_whole_ms"),
                                                       fig("latency", "raw_p99_whole_ms"))
    growth = arms.get("growth", {}).get("median", {})
    costs = sorted((int(k.rsplit("_", 1)[1]), v) for k, v in growth.items()
                   if k.startswith("us_per_decision_"))
    found["growth_cost_largest_vs_smallest"] = div(costs[-1][1], costs[0][1]) if costs else None
    found["restore_keys_per_s"] = fig("restore", "keys_per_s")
    for count in (2, 3):
        found[f"scale_out_speedup_{count}"] = fig("scale-out", f"speedup_{count}")
    raw_p50, raw_p99 = fig("sdk", "raw_p50_ms"), fig("sdk", "raw_p99_ms")
    found["sdk_duplicate_p50_vs_raw"] = div(fig("sdk", "duplicate_p50_ms"), raw_p50)
    found["sdk_duplicate_p99_vs_raw"] = div(fig("sdk", "duplicate_p99_ms"), raw_p99)
    sdk = arms.get("sdk", {}).get("median", {})
    call_ms = sdk.get("call_ms")
    found["sdk_fresh_p50_vs_budget"] = div(
        fig("sdk", "fresh_p50_ms"),
        call_ms + 4 * raw_p50 if call_ms is not None and raw_p50 is not None else None)
    sizes = sorted(int(k.split("_")[2]) for k in sdk
                   if k.startswith("status_view_") and k.count("_") == 4
                   and k.endswith("_p99_ms"))
    found["sdk_status_view_p99_ms_at_largest"] = (
        fig("sdk", f"status_view_{sizes[-1]}_p99_ms") if sizes else None)
    found["connector_payments_per_s"] = fig("connector", "payments_per_s")
    return found


def targets(found: dict[str, float | None]) -> list[dict[str, Any]]:
    rows = []
    for name, op, bound in TARGETS:
        value = found.get(name)
        met = None if value is None else (value >= bound if op == ">=" else value <= bound)
        rows.append({"ratio": name, "target": f"{op} {bound:g}", "value": value, "met": met})
    return rows


def build(options: BenchOptions, sizes: Sizes, workload: Workload, results: list[ArmResult],
          bootstrap: str, local: bool, pg_server: Any, kafka_version: str,
          loadavg_before: str) -> dict[str, Any]:
    arms = summarise(results)
    found = ratios(arms)
    return {
        "machine": machine(kafka_version if local else "external cluster",
                           getattr(pg_server, "version", None), loadavg_before),
        "config": {**options.model_dump(), "bootstrap": "local (started by the benchmark)"
                   if local else bootstrap, "sizes": asdict(sizes)},
        "workload": workload.facts(),
        "arms": arms, "ratios": found, "targets": targets(found),
    }


def table(report: dict[str, Any]) -> str:
    lines = [f"{'arm':<12} {'median':>14} {'unit':<16} {'runs':>4} {'peak RSS':>9}"]
    for name, entry in report["arms"].items():
        unit, value = next(((u, entry["median"][k]) for k, u in PRIMARY.items()
                            if k in entry["median"]), ("", 0.0))
        if name == "growth":  # the cost at the largest key count
            costs = sorted((int(k.rsplit("_", 1)[1]), v) for k, v in entry["median"].items()
                           if k.startswith("us_per_decision_"))
            unit, value = f"us/dec@{costs[-1][0]:,}", costs[-1][1]
        lines.append(f"{name:<12} {value:>14,.1f} {unit:<16} {len(entry['runs']):>4} "
                     f"{entry['peak_rss_mb']:>6,.0f} MiB")
    lines += ["", f"{'ratio':<34} {'value':>12} {'target':>10}  result"]
    bounds = {row["ratio"]: row for row in report["targets"]}
    for name, value in report["ratios"].items():
        row = bounds.get(name)
        shown = "-" if value is None else f"{value:,.2f}"
        verdict = "" if row is None or row["met"] is None else ("met" if row["met"] else "MISSED")
        lines.append(f"{name:<34} {shown:>12} {row['target'] if row else '':>10}  {verdict}")
    return "\n".join(lines)
