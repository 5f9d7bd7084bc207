"""Restore: how fast a processor whose local state was wiped rebuilds it from the changelog.

Runs the ledger once on a topic set of its own (``<prefix>-restore.*``: the workload copied
to its intents), so its changelog holds this run's records only and keys/s counts what one
processor restores, not the records of the other ledger runs it would skip. Then restarts
the processor twice, each time after producing one sentinel intent on a new key: once with
the state intact (the baseline), once with the state folder deleted. The restore time is
the processor's own: the ``partitions assigned`` log line (logged at INFO, so the restarts
run with ``LEDGER_LOG_LEVEL=INFO``) gives the seconds from the assignment to every store
caught up from ``<prefix>-restore.changelog``, and the changelog records read; keys/s is
the keys the run reserved over that span. The time from process start to the sentinel's
receipt is reported for both restarts (what an operator waits for).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from ledger_lab.bench.arms.ledger import LedgerArm
from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.processes import processor
from ledger_lab.bench.topics import (
    create_ledger_topics,
    end_offsets,
    read_span,
    write_records,
)
from ledger_lab.bench.workload import BASE_AT_MS, intent_for, refund_args
from ledger_stream.config import Settings
from ledger_stream.serde import AvroCodec

ASSIGNED = "partitions assigned"


def recovery(log: Path, since: int) -> tuple[float, int] | None:
    """(restore seconds, changelog records read) of the first assignment logged after byte
    ``since`` of ``log`` (None: none)."""
    with log.open("rb") as fh:
        fh.seek(since)
        for raw in fh:
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # not one of the processor's JSON lines
            if isinstance(entry, dict) and entry.get("msg") == ASSIGNED:
                records = int(entry["restored_records"]) + int(entry["skipped_records"])
                return max(float(entry["restore_seconds"]), 0.001), records
    return None


class RestoreArm:
    name = "restore"
    repeated = False

    def __init__(self, guarantee: str = "at-least-once") -> None:
        self.guarantee = guarantee

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        prefix = f"{ctx.prefix}-restore"
        create_ledger_topics(ctx.bootstrap, Settings(kafka_bootstrap=ctx.bootstrap,
                                                     topic_prefix=prefix,
                                                     partitions=ctx.partitions))
        write_records(ctx.bootstrap, f"{prefix}.intents", ctx.workload.records)
        ledger = LedgerArm(self.guarantee, prefix).run(ctx, 0).notes
        group, state_dir, keys = ledger["group"], Path(ledger["state_dir"]), ctx.workload.fresh
        changelog = f"{prefix}.changelog"
        log = ctx.folder("logs") / f"{group}-restore.log"
        ctx.progress(self.name, 0, 2)
        intact_s, _, _, rss1 = self._restart(ctx, prefix, group, state_dir, log, 1)
        ctx.progress(self.name, 1, 2)
        shutil.rmtree(state_dir)
        wiped_s, restore_s, records, rss2 = self._restart(ctx, prefix, group, state_dir, log,
                                                          2)
        ctx.progress(self.name, 2, 2)
        return ArmResult(self.name, repetition, {
            "keys_per_s": keys / restore_s, "changelog_records_per_s": records / restore_s,
            "restore_s": restore_s, "first_decision_intact_s": intact_s,
            "first_decision_wiped_s": wiped_s}, max(rss1, rss2),
            {"keys": keys, "changelog_records": records, "changelog_topic": changelog,
             "changelog_end_offsets": sum(end_offsets(ctx.bootstrap, changelog).values())})

    def _restart(self, ctx: BenchContext, prefix: str, group: str, state_dir: Path,
                 log: Path, serial: int) -> tuple[float, float, int, float]:
        """(seconds from start to the sentinel's receipt, restore seconds, changelog
        records read, peak RSS)."""
        receipts, intents = f"{prefix}.receipts", f"{prefix}.intents"
        start = end_offsets(ctx.bootstrap, receipts)
        sentinel = intent_for("sentinel", serial, refund_args(serial, 0), f"sentinel-{serial}",
                              BASE_AT_MS + 10**9 + serial)
        write_records(ctx.bootstrap, intents,
                      [(sentinel.key.encode(), AvroCodec().encode(sentinel))])
        since = log.stat().st_size if log.exists() else 0
        spawned = time.time()
        child = processor(ctx.bootstrap, prefix, group, state_dir, log, self.guarantee,
                          ctx.partitions, env={"LEDGER_LOG_LEVEL": "INFO"})
        try:
            ctx.drain(child, group, intents, len(ctx.workload) + serial,
                      f"{self.name} restart {serial}")
        finally:
            rss = child.stop()
        span = read_span(ctx.bootstrap, receipts, start, 1)
        restored = recovery(log, since)
        if restored is None:
            raise BenchError(f"restore: the processor logged no assignment ({log})")
        return span.last_ms / 1000 - spawned, restored[0], restored[1], rss
