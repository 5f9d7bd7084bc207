"""Scale-out: one, two and three processor processes in one consumer group over the same
partitions, deciding the shared workload, with the broker's CPU accounted for.

Each count gets a topic set of its own (``<prefix>-xN.*``), so every run starts from empty
topics and a fresh group. The processors start first and the workload is copied into their
intents topic only once the group is stable with every member holding partitions, so the
rate measures the steady group, not its joins. Decisions/s is the receipts' append-time
span over the workload's size (at least once, a rebalance may repeat a few receipts; the
span ends at the workload's count). CPU per decision is given for the processors together
and for the broker (when the benchmark started it), with the machine's busy share: on two
cores a second process can only help while the first leaves a core idle.
"""

from __future__ import annotations

import time
import uuid

from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.processes import Child, cpu_seconds, machine_ticks, processor
from ledger_lab.bench.topics import (
    CommitWatcher,
    admin,
    create_ledger_topics,
    read_span,
    write_records,
)
from ledger_lab.local_kafka.node import running_pids
from ledger_stream.config import Settings

COUNTS = (1, 2, 3)
STABLE_TIMEOUT_S = 120.0


class ScaleOutArm:
    name = "scale-out"
    repeated = False

    def __init__(self, guarantee: str = "at-least-once", counts: tuple[int, ...] = COUNTS):
        self.guarantee = guarantee
        self.counts = counts

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        figures: dict[str, float] = {}
        peak = 0.0
        for done, count in enumerate(self.counts):
            ctx.progress(self.name, done, len(self.counts))
            found, rss = self._measure(ctx, count)
            figures.update({f"{k}_{count}": v for k, v in found.items()})
            peak = max(peak, rss)
        ctx.progress(self.name, len(self.counts), len(self.counts))
        base = figures.get(f"decisions_per_s_{self.counts[0]}")
        for count in self.counts[1:]:
            if base:
                figures[f"speedup_{count}"] = figures[f"decisions_per_s_{count}"] / base
        return ArmResult(self.name, repetition, figures, peak,
                         {"guarantee": self.guarantee, "counts": list(self.counts),
                          "broker_accounted": bool(running_pids())})

    def _measure(self, ctx: BenchContext, count: int) -> tuple[dict[str, float], float]:
        prefix = f"{ctx.prefix}-x{count}"
        create_ledger_topics(ctx.bootstrap, Settings(kafka_bootstrap=ctx.bootstrap,
                                                     topic_prefix=prefix,
                                                     partitions=ctx.partitions))
        group = f"{prefix}-{uuid.uuid4().hex[:6]}"
        logs = ctx.folder("logs")
        children = [processor(ctx.bootstrap, prefix, group, ctx.folder(f"state-{group}-{i}"),
                              logs / f"{group}-{i}.log", self.guarantee, ctx.partitions)
                    for i in range(count)]
        try:
            _await_stable(ctx.bootstrap, group, children)
            brokers = running_pids()
            pids = [c.pid for c in children]
            before = (sum(map(cpu_seconds, pids)), sum(map(cpu_seconds, brokers)),
                      machine_ticks())
            write_records(ctx.bootstrap, f"{prefix}.intents", ctx.workload.records)
            expected = len(ctx.workload)
            _drain(ctx, children, group, f"{prefix}.intents", expected, f"{self.name} {count}")
            after = (sum(map(cpu_seconds, pids)), sum(map(cpu_seconds, brokers)),
                     machine_ticks())
        finally:
            rss = sum(child.stop() for child in children)
        span = read_span(ctx.bootstrap, f"{prefix}.receipts", dict.fromkeys(
            range(ctx.partitions), 0), expected)
        ticks = after[2][1] - before[2][1]
        found = {"decisions_per_s": span.rate(),
                 "processors_cpu_us_per_decision": (after[0] - before[0]) / expected * 1e6,
                 "machine_busy": (after[2][0] - before[2][0]) / ticks if ticks else 0.0}
        if brokers:
            found["broker_cpu_us_per_decision"] = (after[1] - before[1]) / expected * 1e6
        return found, rss


def _await_stable(bootstrap: str, group: str, children: list[Child]) -> None:
    """Until the group is stable with one member per child, each holding partitions."""
    client = admin(bootstrap)
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    while True:
        for child in children:
            child.require_alive("scale-out processor")
        try:
            described = client.describe_consumer_groups([group])[group].result(timeout=10)
            members = described.members
            if (str(described.state).endswith("STABLE") and len(members) == len(children)
                    and all(m.assignment.topic_partitions for m in members)):
                return
        except Exception:  # not yet known to the coordinator
            pass
        if time.monotonic() > deadline:
            raise BenchError(f"scale-out: group {group} not stable with {len(children)} "
                             f"members after {STABLE_TIMEOUT_S:.0f} s\n{children[0].tail()}")
        time.sleep(0.25)


def _drain(ctx: BenchContext, children: list[Child], group: str, topic: str, expected: int,
           label: str) -> None:
    watcher = CommitWatcher(ctx.bootstrap, group, topic)
    deadline = time.monotonic() + 600
    try:
        while (done := watcher.committed()) < expected:
            for child in children:
                child.require_alive(label)
            ctx.progress(label, done, expected)
            if time.monotonic() > deadline:
                raise BenchError(f"{label}: {done}/{expected} after 600 s")
            time.sleep(0.25)
    finally:
        watcher.close()
