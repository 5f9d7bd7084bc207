"""What the latency arm keeps beside its percentiles, for the charts: each path's latency
distribution (a hundred quantiles), and the processor's ``batch stages`` log lines
(ledger_stream/processor/stages.py) summed: where its batches' time went under that load."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

QUANTILES = [i / 100 for i in range(1, 100)] + [0.995, 0.999, 0.9995, 0.9999, 1.0]


def summed(log: Path) -> dict[str, Any] | None:
    """Batches, records, mean ms per batch and share of the wall time per stage, each
    stage's longest, and the collector's pauses, over every window the log holds; None when
    it holds none (a processor that logs no stage lines)."""
    windows = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if '"batch stages"' not in line:
            continue
        try:
            windows.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a kill: the others still count
    batches = sum(int(w.get("batches", 0)) for w in windows)
    if not batches:
        return None
    total: dict[str, float] = {}
    longest: dict[str, float] = {}
    for w in windows:
        for stage, ms in w.get("mean_ms", {}).items():
            total[stage] = total.get(stage, 0.0) + ms * w["batches"]
        for stage, ms in w.get("max_ms", {}).items():
            longest[stage] = max(longest.get(stage, 0.0), ms)
    wall = sum(total.values())
    return {
        "windows": len(windows), "batches": batches,
        "records": sum(int(w.get("records", 0)) for w in windows),
        "mean_ms": {s: round(v / batches, 3) for s, v in total.items()},
        "share": {s: round(v / wall, 4) if wall else 0.0 for s, v in total.items()},
        "max_ms": longest,
        "gc_pauses": sum(int(w.get("gc_pauses", 0)) for w in windows),
        "gc_ms": round(sum(float(w.get("gc_ms", 0.0)) for w in windows), 3),
    }


def cdf(latencies_ms: list[float]) -> list[list[float]]:
    """[quantile, ms] at each of QUANTILES (nearest rank) of ``latencies_ms``: the
    distribution a chart draws, a hundred points instead of every record."""
    ordered = sorted(latencies_ms)
    if not ordered:
        return []
    count = len(ordered)
    return [[q, round(ordered[min(count, max(1, math.ceil(q * count))) - 1], 3)]
            for q in QUANTILES]
