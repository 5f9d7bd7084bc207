"""What every arm gets (the broker, the shared workload, a work folder, a progress line) and
what it gives back (named figures and its peak RSS)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ledger_lab.bench.arms.peers_plan import PeersPlan
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.processes import Child, CpuWindow
from ledger_lab.bench.topics import CommitWatcher
from ledger_lab.bench.workload import Workload

Progress = Callable[[str, float, float], None]  # (label, done, total)
DRAIN_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Sizes:
    """Sizes of the arms that do not replay the shared workload."""

    pg_naive_intents: int = 10_000
    latency_seconds: float = 28.0  # the first WARM_UP_S (8) left out: 20 s measured
    latency_rate: float | None = None  # intents/s of the latency arm; None: half the ledger's
    growth_keys: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    growth_batch: int = 50_000
    sdk_calls: int = 200  # sequential calls per SDK operation
    sdk_agents: int = 64  # threads sharing one client
    status_sizes: tuple[int, ...] = (0, 200_000, 2_000_000)  # receipts behind the view
    call_ms: int = 20  # the sandbox's time per call (sdk and connector arms)
    dispatches: int = 3_000  # the connector arm's intents
    peers: PeersPlan = PeersPlan()  # the peers arm: concurrencies, calls, repetitions


@dataclass
class BenchContext:
    bootstrap: str
    prefix: str  # the run's topic prefix; the workload lives in ``<prefix>.intents``
    partitions: int
    workdir: Path
    workload: Workload
    sizes: Sizes
    progress: Progress
    # Facts one arm leaves for another (the ledger's state for restore, its rate for
    # latency), keyed by arm name.
    shared: dict[str, Any] = field(default_factory=dict)

    @property
    def source_topic(self) -> str:
        return f"{self.prefix}.intents"

    def folder(self, name: str) -> Path:
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def drain(self, child: Child, group: str, topic: str, expected: int, label: str,
              timeout_s: float = DRAIN_TIMEOUT_S) -> dict[str, float]:
        """Wait until ``group`` has committed ``expected`` records of ``topic``: every input
        decided and its outputs acknowledged. Raises BenchError if ``child`` dies.

        Returns the child's CPU per record and the machine's busy share between the first
        and the last commit seen (commits lag by up to a checkpoint at both ends)."""
        deadline = time.monotonic() + timeout_s
        window, first_done = CpuWindow(child.pid), -1
        watcher = CommitWatcher(self.bootstrap, group, topic)
        try:
            while True:
                child.require_alive(label)
                done = watcher.committed()
                self.progress(label, done, expected)
                if done > 0 and first_done < 0:
                    window.sample()
                    first_done = done
                if done >= expected:
                    window.sample()
                    return window.figures(done - first_done)
                if time.monotonic() > deadline:
                    raise BenchError(f"{label}: {done}/{expected} after {timeout_s:.0f} s\n"
                                     f"{child.tail()}")
                time.sleep(0.25)
        finally:
            watcher.close()


@dataclass(frozen=True, slots=True)
class ArmResult:
    """One run of one arm: its figures (all positive numbers when it worked)."""

    arm: str
    repetition: int
    figures: dict[str, float]
    peak_rss_mb: float
    notes: dict[str, Any] = field(default_factory=dict)


class Arm(Protocol):
    name: str
    repeated: bool  # interleaved and repeated (throughput arms), or run once

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult: ...
