"""The ledger arm: the real processor (``ledger-stream processor``, a child process)
deciding the shared workload, at least once or exactly once.

Each run has its own consumer group and state folder, and reads the workload from
``<prefix>.intents`` from the start. The runs of one prefix share its changelog (one topic
set per prefix); an arm that needs a changelog of its own (restore) passes a prefix of its
own, whose ``.intents`` it filled with the workload. Every intent gets exactly one receipt, so
decisions/s is the receipts' append-time span (first to last) over the intents decided;
the processor's start-up (imports, group join, store opening) is outside the span.
"""

from __future__ import annotations

import uuid

from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.latency_detail import summed
from ledger_lab.bench.processes import processor
from ledger_lab.bench.topics import end_offsets, read_span

SHORT = {"at-least-once": "alo", "exactly-once": "eos"}


class LedgerArm:
    repeated = True

    def __init__(self, guarantee: str, prefix: str | None = None) -> None:
        self.guarantee = guarantee
        self.name = f"ledger-{SHORT[guarantee]}"
        self.prefix = prefix  # None: the run's own (ctx.prefix)

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        prefix = self.prefix or ctx.prefix
        receipts = f"{prefix}.receipts"
        start = end_offsets(ctx.bootstrap, receipts)
        group = f"{prefix}-{self.name}-{uuid.uuid4().hex[:6]}"
        state_dir = ctx.folder(f"state-{group}")
        expected = len(ctx.workload)
        log = ctx.folder("logs") / f"{group}.log"
        child = processor(ctx.bootstrap, prefix, group, state_dir, log, self.guarantee,
                          ctx.partitions, env={"LEDGER_LOG_LEVEL": "INFO"})  # stage lines
        try:
            cpu = ctx.drain(child, group, f"{prefix}.intents", expected, self.name)
        finally:
            rss = child.stop()
        span = read_span(ctx.bootstrap, receipts, start, expected)
        return ArmResult(self.name, repetition,
                         {"decisions_per_s": span.rate(), "seconds": span.seconds, **cpu}, rss,
                         {"receipts": span.count, "guarantee": self.guarantee,
                          "group": group, "state_dir": str(state_dir), "prefix": prefix,
                          "batch_stages": summed(log)})
