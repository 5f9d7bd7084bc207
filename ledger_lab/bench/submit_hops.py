"""The parts of ``submit_timeline`` that place a submit's records on its timeline twice:
when their producer handed them over (the record's timestamp) and when a read-committed
reader could first see them (``Watcher``), so each hop splits into the work of the process
that wrote a record and the commit (and fetch) that made it readable. And the CPU each
process of the stack used (``CpuMeter``), read from /proc per PID and per thread.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from ledger_lab.bench.processes import cpu_seconds

ROLES = ("intents", "dispatch", "attempts", "receipts")
DONE = "submit returned"  # the last step of every submit
Seen = dict[tuple[bytes, int, int], float]  # (topic index, partition, offset) -> seen at


class Watcher:
    """A read-committed consumer of the ledger's topics, from their end, on its own thread:
    the wall-clock time each record first became readable (it waits for records with the
    same settings as the SDK's receipts reader: a record committed is fetched at once)."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int) -> None:
        self.topics = topics
        self.seen: dict[tuple[int, int, int], float] = {}
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "timeline-watch",
                                   "enable.auto.commit": False, "log_level": 3,
                                   "isolation.level": "read_committed",
                                   "fetch.wait.max.ms": 10})
        parts = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        ends = [self._consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in parts]
        self._consumer.assign([TopicPartition(tp.topic, tp.partition, end)
                               for tp, end in zip(parts, ends, strict=True)])
        self._stop = threading.Event()
        self.native_id = 0
        self._thread = threading.Thread(target=self._run, name="timeline-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.native_id = threading.get_native_id()
        index = {t: i for i, t in enumerate(self.topics)}
        while not self._stop.is_set():
            msg = self._consumer.poll(0.05)
            if msg is None or msg.error():
                continue
            now = time.time() * 1000
            for m in (msg, *self._consumer.consume(500, timeout=0)):
                if not m.error():
                    self.seen[(index[m.topic() or ""], m.partition() or 0,
                               m.offset() or 0)] = now

    def close(self) -> None:
        time.sleep(0.5)  # the last records of the last submit
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def thread_cpu_seconds(native_id: int) -> float:
    """User + system CPU seconds of one thread of this process (0.0 when unknown)."""
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1]
    except OSError:
        return 0.0
    values = fields.split()
    return (int(values[11]) + int(values[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of named processes between ``start`` and ``stop``; ``client`` is this
    process less the watcher's thread (it is the benchmark's, not the stack's)."""

    def __init__(self, pids: dict[str, int], watcher: Watcher | None) -> None:
        self._pids = {**pids, "client": os.getpid()}
        self._watcher = watcher
        self._start: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        found = {name: cpu_seconds(pid) for name, pid in self._pids.items()}
        if self._watcher is not None and self._watcher.native_id:
            found["client"] -= thread_cpu_seconds(self._watcher.native_id)
        return found

    def start(self) -> None:
        self._start = self._sample()

    def stop(self) -> None:
        end = self._sample()
        self.used = {name: end[name] - self._start[name] for name in end}


def visible_at(watcher: Watcher, located: dict[bytes, list[tuple[int, int, int, int, str, str,
                                                                  str]]]
               ) -> dict[bytes, list[tuple[int, str, str, str]]]:
    """Per key, (ms the record became readable, role, type, answers) for each record the
    watcher saw, from (topic index, partition, offset, ts, role, type, answers) rows."""
    found: dict[bytes, list[tuple[int, str, str, str]]] = defaultdict(list)
    for key, rows in located.items():
        for topic, partition, offset, _, role, name, answers in rows:
            at = watcher.seen.get((topic, partition, offset))
            if at is not None:
                found[key].append((int(at), role, name, answers))
    return found


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {"p50": float("nan"), "p90": float("nan"), "p99": float("nan"), "n": 0}
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": statistics.median(ordered), "p90": at(0.9), "p99": at(0.99),
            "n": len(ordered)}


def hops(produced: dict[str, list[float]], visible: dict[str, list[float]]
         ) -> list[tuple[str, dict[str, float]]]:
    """The median path as hops: for each step in order, its writer's share (from the
    previous step's visibility to its own hand-over) and its commit's (from hand-over to
    visibility). A step handed over before the step before it was readable was written in
    the same batch (a Dispatch and its Receipt): it is no hop of its own. Medians of the
    steps' medians: per-submit pairs are not kept apart here, so the hops add up to the
    medians' differences, not to a percentile of sums."""
    rows: list[tuple[str, dict[str, float]]] = []
    last_name, last = "submit start", 0.0
    for step, values in produced.items():
        made = statistics.median(values)
        if made < last and step != DONE:
            continue  # written in the same batch as the step before
        rows.append((f"{last_name} -> {step} handed over", {"ms": made - last}))
        seen = visible.get(step)
        if seen:
            shown = statistics.median(seen)
            rows.append((f"{step}: handed over -> readable", {"ms": shown - made}))
            last_name, last = f"{step} readable", shown
        else:
            last_name, last = f"{step} handed over", made
    return rows


def load_average() -> tuple[float, float, float]:
    one, five, fifteen = Path("/proc/loadavg").read_text().split()[:3]
    return float(one), float(five), float(fifteen)


def as_json(steps: dict[str, Any]) -> dict[str, Any]:
    return {kind: {step: percentiles(values) for step, values in rows.items()}
            for kind, rows in steps.items()}
