"""The benchmark's results as pictures: PNG files beside the JSON they are drawn from.

Whatever a result holds is drawn, the rest is skipped:

- ``latency-cdf``: each path's latency distribution (ledger against the raw Kafka round
  trip) from the latency arm's quantiles, with the tail on a log scale beside it;
- ``batch-stages``: where the processor's batches spent their wall time, by stage (its
  ``batch stages`` log lines, summed), in the latency arm and in the throughput arms;
- ``cpu-stages``: µs of CPU per decision by stage, at least once and exactly once, from the
  CPU harness (``ledger-stream bench --cpu``), the echo's and io-floor's per record beside;
- ``peers``: effects/s and p50/p99 per contestant and concurrency, from a ``peers`` section
  (figures named ``<contestant>_<agents>_<fresh|duplicate>_<stat>``).

Drawn with matplotlib's Agg backend (files only, no display); install the ``charts`` extra.
``python -m ledger_lab.bench.charts RESULT.json ... --out DIR``, or ``ledger-stream bench
--charts DIR``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Report = dict[str, Any]
PEER_FIGURE = re.compile(r"^(?P<who>.+)_(?P<agents>\d+)_(?P<kind>fresh|duplicate)_"
                         r"(?P<stat>p50_ms|p99_ms|per_s)$")
COLOURS = {"ledger": "#1f5fa8", "raw": "#8a8a8a", "alo": "#1f5fa8", "eos": "#d9822b"}


class ChartsUnavailable(RuntimeError):
    """matplotlib is not installed (the ``charts`` extra)."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ChartsUnavailable("drawing charts needs matplotlib: pip install "
                                "'ledger-stream[charts]'") from exc
    matplotlib.use("Agg")  # files only: no display on a server or in CI
    import matplotlib.pyplot as plt
    return plt


def _arm_notes(report: Report, arm: str, key: str) -> Any:
    """``key`` of the notes of the arm's last run that has it (None when none has)."""
    runs = report.get("arms", {}).get(arm, {}).get("runs", [])
    for run in reversed(runs if isinstance(runs, list) else []):
        notes = run.get("notes") if isinstance(run, dict) else None
        if isinstance(notes, dict) and notes.get(key):
            return notes[key]
    return None


def latency_cdf(report: Report, path: Path) -> bool:
    """Ledger against raw: the share answered within x ms (left) and the tail (right)."""
    curves = _arm_notes(report, "latency", "cdf_ms")
    if not isinstance(curves, dict) or not any(curves.values()):
        return False
    plt = _pyplot()
    fig, (whole, tail) = plt.subplots(1, 2, figsize=(11, 4.2))
    median = report.get("arms", {}).get("latency", {}).get("median", {})
    for name, points in curves.items():
        if not points:
            continue
        qs, ms = [p[0] for p in points], [p[1] for p in points]
        p99 = median.get(f"{name}_p99_ms")
        label = f"{name} (p50 {median.get(f'{name}_p50_ms', ms[len(ms) // 2]):.1f} ms" + (
            f", p99 {p99:.1f} ms)" if p99 is not None else ")")
        colour = COLOURS.get(name)
        whole.plot(ms, [q * 100 for q in qs], label=label, color=colour, linewidth=2)
        tail.plot(ms, [max(1 - q, 1e-5) for q in qs], color=colour, linewidth=2)
    rate = median.get("rate_per_s")
    whole.set(xscale="log", xlabel="latency, ms (log)", ylabel="answered within, %",
              title="Latency CDF" + (f" at {rate:,.0f}/s" if rate else ""))
    tail.set(xscale="log", yscale="log", xlabel="latency, ms (log)",
             ylabel="share slower (1 - quantile)", title="Tail")
    tail.invert_yaxis()
    for ax in (whole, tail):
        ax.grid(True, which="both", alpha=0.3)
    whole.legend(loc="upper left", fontsize=9)
    return _save(fig, path, plt)


def _stage_sources(report: Report) -> list[tuple[str, dict[str, Any]]]:
    """(label, summed stage lines) of every processor run the report kept them for."""
    found = []
    for arm, key, what in (("latency", "ledger_batch_stages", "latency arm"),
                           ("ledger-alo", "batch_stages", "ledger-alo, backlog"),
                           ("ledger-eos", "batch_stages", "ledger-eos, backlog")):
        stages = _arm_notes(report, arm, key)
        if isinstance(stages, dict) and stages.get("mean_ms") and stages.get("batches"):
            found.append((what, stages))
    return found


def batch_stages(report: Report, path: Path) -> bool:
    """Share of each processor batch's wall time by stage, for each run that logged it
    (the latency arm at its load; the throughput arms draining a backlog)."""
    sources = _stage_sources(report)
    if not sources:
        return False
    plt = _pyplot()
    names = list(dict.fromkeys(s for _, stages in sources for s in stages["mean_ms"]))
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.9 * len(sources)))
    colours = plt.get_cmap("tab10")
    labels = []
    for row, (what, stages) in enumerate(sources):
        mean = stages["mean_ms"]
        wall = sum(float(v) for v in mean.values()) or 1.0
        left = 0.0
        for i, name in enumerate(names):
            share = float(mean.get(name, 0.0)) / wall
            ax.barh(row, share * 100, left=left * 100, color=colours(i % 10),
                    label=name if row == 0 else None)
            if share >= 0.06:
                ax.text((left + share / 2) * 100, row, f"{float(mean[name]):.1f}",
                        ha="center", va="center", fontsize=8, color="white")
            left += share
        per_batch = stages["records"] / stages["batches"]
        labels.append(f"{what}\n{wall:.1f} ms, {per_batch:,.0f} records/batch\n"
                      f"GC {stages.get('gc_ms', 0):.0f} ms in {stages.get('gc_pauses', 0)}")
    ax.set_yticks(range(len(sources)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set(xlim=(0, 100), xlabel="share of a batch's wall time, % (labels: mean ms)",
           title="Where the processor's batches spend their time")
    ax.legend(ncol=len(names), fontsize=8, loc="upper center",
              bbox_to_anchor=(0.5, -0.12 - 0.3 / len(sources)))
    return _save(fig, path, plt)


def cpu_stages(cpu: Report, path: Path) -> bool:
    """µs per decision by stage from the CPU harness, both guarantees side by side."""
    modes = [m for m in ("alo", "eos") if isinstance(cpu.get(m), dict)
             and isinstance(cpu[m].get("stages_us"), dict)]
    if not modes:
        return False
    plt = _pyplot()
    stages = list(dict.fromkeys(s for m in modes for s in cpu[m]["stages_us"]))
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        values = [float(cpu[mode]["stages_us"].get(s, 0.0)) for s in stages]
        label = {"alo": "at least once", "eos": "exactly once"}[mode]
        total = cpu[mode].get("us")
        ax.bar([x + (i - (len(modes) - 1) / 2) * width for x in range(len(stages))], values,
               width, label=f"{label} ({total:.1f} µs per decision)" if total else label,
               color=COLOURS[mode])
    for key, name, style in (("echo_us", "avro echo", "--"), ("floor_us", "io-floor", ":")):
        if isinstance(cpu.get(key), int | float):
            ax.axhline(cpu[key], color="#444444", linestyle=style, linewidth=1,
                       label=f"{name}, whole record ({cpu[key]:.1f} µs)")
    ax.set_xticks(range(len(stages)), stages)
    ax.set(ylabel="µs of CPU per decision",
           title=f"Processor CPU by stage ({cpu.get('records', '?')} records, "
                 f"{cpu.get('partitions', '?')} partitions, no Kafka)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path, plt)


def peer_figures(report: Report) -> dict[tuple[str, int, str, str], float]:
    """(contestant, agents, fresh|duplicate, stat) -> value, from whichever ``peers`` section
    the report has (the arm's medians, or a top-level mapping); unknown keys are ignored."""
    section = report.get("arms", {}).get("peers", {}).get("median") if isinstance(
        report.get("arms"), dict) else None
    if not isinstance(section, dict):
        section = report.get("peers")
    found = {}
    for key, value in (section or {}).items() if isinstance(section, dict) else []:
        match = PEER_FIGURE.match(str(key))
        if match and isinstance(value, int | float) and not isinstance(value, bool):
            found[(match["who"], int(match["agents"]), match["kind"], match["stat"])] = \
                float(value)
    return found


def peers(report: Report, path: Path) -> bool:
    """Per concurrency level, each contestant's fresh effects/s and fresh and duplicate
    p50 (p99 as a thin whisker)."""
    figures = peer_figures(report)
    if not figures:
        return False
    plt = _pyplot()
    names = sorted({k[0] for k in figures}, key=lambda n: (not n.startswith("ledger"), n))
    levels = sorted({k[1] for k in figures})
    panels = (("fresh", "per_s", "fresh effects/s"), ("fresh", "p50_ms", "fresh p50 ms"),
              ("duplicate", "p50_ms", "duplicate p50 ms"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2))
    width = 0.8 / len(names)
    colours = plt.get_cmap("tab10")
    for ax, (kind, stat, title) in zip(axes, panels, strict=True):
        for i, name in enumerate(names):
            xs = [x + (i - (len(names) - 1) / 2) * width for x in range(len(levels))]
            values = [figures.get((name, n, kind, stat), 0.0) for n in levels]
            ax.bar(xs, values, width, label=name, color=colours(i % 10))
            if stat == "p50_ms":  # the p99 above each bar
                ax.vlines(xs, values, [figures.get((name, n, kind, "p99_ms"), v)
                                       for n, v in zip(levels, values, strict=True)],
                          color="#333333", linewidth=1)
        ax.set_xticks(range(len(levels)), [f"{n} agents" for n in levels])
        ax.set(title=title + (" (line: p99)" if stat == "p50_ms" else ""))
        if stat == "p50_ms":
            ax.set_yscale("log")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    return _save(fig, path, plt)


def _save(fig: Any, path: Path, plt: Any) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png", bbox_inches="tight")  # no empty margins
    plt.close(fig)
    return True


CHARTS: tuple[tuple[str, Callable[[Report, Path], bool]], ...] = (
    ("latency-cdf", latency_cdf), ("batch-stages", batch_stages),
    ("cpu-stages", cpu_stages), ("peers", peers))


def render(report: Report, out: Path, stem: str) -> list[Path]:
    """Every chart ``report`` holds the data of, as ``out/<stem>.<chart>.png``; the paths
    written. ChartsUnavailable without matplotlib (checked only when there is one to draw)."""
    written = []
    for name, draw in CHARTS:
        path = out / f"{stem}.{name}.png"
        if draw(report, path):
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path,
                        help="JSON of `ledger-stream bench` or of its --cpu harness")
    parser.add_argument("--out", type=Path, help="folder for the PNG files (default: "
                        "beside each JSON)")
    args = parser.parse_args(argv)
    for result in args.results:
        try:
            report = json.loads(result.read_text())
        except (OSError, ValueError) as exc:
            print(f"{result}: {exc}", file=sys.stderr)
            return 2
        try:
            if not isinstance(report, dict):
                raise TypeError(f"a JSON {type(report).__name__}, not an object")
            written = render(report, args.out or result.parent, result.stem)
        except OSError as exc:
            print(f"{result}: {exc}", file=sys.stderr)
            return 2
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            # A field of another shape than the bench writes: name the file, no traceback.
            print(f"{result}: not a bench result ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
            return 2
        except ChartsUnavailable as exc:
            print(exc, file=sys.stderr)
            return 2
        for path in written:
            print(path)
        if not written:
            print(f"{result}: nothing to draw (no latency, cpu or peers figures)",
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
