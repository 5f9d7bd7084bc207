"""Runs the benchmark: one broker, one workload, the arms interleaved and repeated.

Steps:
1. Use the given Kafka, or start a local one in a temporary folder (stopped by PID at the
   end, whatever happens).
2. Generate the workload from its seed and write it once to ``<prefix>.intents``.
3. Run the throughput arms interleaved, A B C A B C, ``repeat`` times, so drift on the
   machine (page cache, compaction, a noisy neighbour) spreads over all of them.
4. Run the arms that need their results (latency at half the ledger's measured rate) and
   the arms with topics of their own (restore, growth, scale-out, sdk, connector), once each.
5. Delete what was created (topics on a given cluster, the PostgreSQL server, temporary
   folders) and hand the results to :mod:`.report`.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger_lab.bench.arms.connector import ConnectorArm
from ledger_lab.bench.arms.growth import GrowthArm
from ledger_lab.bench.arms.latency import LatencyArm
from ledger_lab.bench.arms.ledger import LedgerArm
from ledger_lab.bench.arms.peers import PeersArm
from ledger_lab.bench.arms.postgres import PostgresArm
from ledger_lab.bench.arms.raw_echo import EchoArm
from ledger_lab.bench.arms.restore import RestoreArm
from ledger_lab.bench.arms.scale_out import ScaleOutArm
from ledger_lab.bench.arms.sdk import SdkArm
from ledger_lab.bench.context import Arm, ArmResult, BenchContext
from ledger_lab.bench.options import BenchOptions
from ledger_lab.bench.topics import (
    create_ledger_topics,
    delete_topics,
    topics_named,
    write_records,
)
from ledger_lab.bench.workload import WorkloadSpec, generate
from ledger_lab.local_kafka.ephemeral import kafka_for
from ledger_stream.config import Settings

Say = Callable[[str], None]


class Progress:
    """One status line on stderr: rewritten in place on a terminal, else a line per step."""

    def __init__(self, stream: Any = None) -> None:
        self._stream = stream or sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._started = time.monotonic()
        self._last: tuple[str, int] = ("", -1)

    def say(self, text: str) -> None:
        """A line that stays (on a terminal it replaces the status line)."""
        prefix = "\r\033[K" if self._tty else ""
        self._stream.write(f"{prefix}{self._stamp()} {text}\n")
        self._stream.flush()

    def update(self, label: str, done: float, total: float) -> None:
        """The running status: in place on a terminal, else a line per quarter."""
        share = int(100 * done / total) if total else 100
        line = f"{label}: {done:,.0f}/{total:,.0f} ({share}%)"
        if self._tty:
            self._stream.write(f"\r\033[K{self._stamp()} {line}")
            self._stream.flush()
        elif (label, share // 25) != self._last:
            self._last = (label, share // 25)
            self.say(line)

    def _stamp(self) -> str:
        elapsed = time.monotonic() - self._started
        return f"[bench {elapsed // 60:02.0f}:{elapsed % 60:04.1f}]"


def plan(options: BenchOptions) -> tuple[list[Arm], list[Arm]]:
    """(interleaved and repeated arms, arms run once after them)."""
    names = options.arm_names()
    guarantees = options.guarantees()
    latency_guarantee = "at-least-once" if "at-least-once" in guarantees else guarantees[0]
    repeated: list[Arm] = []
    once: list[Arm] = []
    for name in names:
        if name.endswith("-echo"):
            repeated.append(EchoArm(name.removesuffix("-echo")))
        elif name == "io-floor":
            repeated.append(EchoArm("io"))
        elif name == "ledger":
            repeated.extend(LedgerArm(g) for g in guarantees)
        elif name.startswith("pg-"):
            repeated.append(PostgresArm(name.removeprefix("pg-")))
        elif name == "latency":
            once.append(LatencyArm(latency_guarantee))
        elif name == "growth":
            once.append(GrowthArm())
        elif name == "restore":
            once.append(RestoreArm(latency_guarantee))
        elif name == "scale-out":
            once.append(ScaleOutArm(latency_guarantee))
        elif name == "sdk":
            once.append(SdkArm())
        elif name == "connector":
            once.append(ConnectorArm())
        elif name == "peers":
            once.append(PeersArm())
    return repeated, once


def run_bench(options: BenchOptions, settings: Settings,
              progress: Progress | None = None) -> dict[str, Any]:
    """Run the selected arms; returns the raw results for :func:`report.build`."""
    from ledger_lab.bench import report

    progress = progress or Progress()
    options, sizes = options.sized()
    repeated, once = plan(options)
    workdir = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    prefix = f"{settings.topic_prefix}-bench-{uuid.uuid4().hex[:6]}"
    results: list[ArmResult] = []
    with kafka_for(settings, progress.say) as (bootstrap, local):
        ctx: BenchContext | None = None
        try:
            spec = WorkloadSpec(options.intents, options.duplicate_share,
                                options.conflict_share, options.keys, options.seed)
            load_before = report.loadavg()
            progress.say(f"generating {spec.intents:,} intents (seed {spec.seed}); load "
                         f"average {load_before}")
            workload = generate(spec)
            ctx = BenchContext(bootstrap, prefix, options.partitions, workdir, workload, sizes,
                               progress.update)
            create_ledger_topics(bootstrap, Settings(kafka_bootstrap=bootstrap,
                                                     topic_prefix=prefix,
                                                     partitions=options.partitions))
            write_records(bootstrap, ctx.source_topic, workload.records)
            progress.say(f"workload written to {ctx.source_topic}: {workload.facts()}")
            for repetition in range(1, options.repeat + 1):
                for arm in repeated:
                    results.append(_run(arm, ctx, repetition, options.repeat, progress))
            _share_ledger_rate(ctx, results)
            for arm in once:
                results.append(_run(arm, ctx, 1, 1, progress))
            return report.build(options, sizes, workload, results, bootstrap, local,
                                ctx.shared.get("pg-server"), settings.kafka_version,
                                load_before)
        finally:
            _clean_up(bootstrap, local, prefix, ctx, workdir, progress)


def _run(arm: Arm, ctx: BenchContext, repetition: int, of: int,
         progress: Progress) -> ArmResult:
    progress.say(f"{arm.name} ({repetition}/{of}) starting")
    result = arm.run(ctx, repetition)
    shown = ", ".join(f"{k}={v:,.1f}" for k, v in result.figures.items())
    progress.say(f"{arm.name} ({repetition}/{of}): {shown}; peak RSS "
                 f"{result.peak_rss_mb:,.0f} MiB")
    return result


def _share_ledger_rate(ctx: BenchContext, results: list[ArmResult]) -> None:
    """The latency arm loads the processor at half its measured rate (median of runs)."""
    for name in ("ledger-alo", "ledger-eos"):
        rates = [r.figures["decisions_per_s"] for r in results if r.arm == name]
        if rates:
            ctx.shared["ledger-max-rate"] = statistics.median(rates)
            ctx.shared["ledger-max-rate-arm"] = name
            return


def _clean_up(bootstrap: str, local: bool, prefix: str, ctx: BenchContext | None,
              workdir: Path, progress: Progress) -> None:
    server = ctx.shared.get("pg-server") if ctx else None
    if server is not None:
        server.remove()
    if not local:  # a cluster we did not start keeps nothing of ours
        try:
            delete_topics(bootstrap, topics_named(bootstrap, prefix))
        except Exception as exc:  # cleaning up must not hide the run's own error
            progress.say(f"could not delete the benchmark topics: {exc}")
    shutil.rmtree(workdir, ignore_errors=True)
