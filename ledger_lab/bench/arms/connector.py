"""One connector instance against a target that does not deduplicate (every call waits for
its Grant from the processor: grant-only), the target taking ``call_ms`` per call.

A full stack (ledger topics with the run's partitions, a processor, the payments sandbox with
``--latency-ms``, one HTTP connector not declared deduplicating) takes a warm-up round (N/2
intents, not measured: a broker started seconds before spends more CPU compiling its own
code than serving the first thousands of requests, which a long-running broker does not),
then N intents on fresh keys at once. The rate comes from the sandbox's own records (its
SQLite file, read-only): N over the span between the first and the last payment's creation
time. Every key must have exactly one payment, or the arm fails (BenchError).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.processes import cpu_seconds, peak_rss_mb, throwaway_approver_env
from ledger_stream.config import Settings
from ledger_stream.kafka import topics

Say = Callable[[str], None]
# Production timings, not the test suite's short ones.
CONNECTOR_ENV = {"LEDGER_CONNECTOR_LEASE_MS": "30000", "LEDGER_CONNECTOR_CALL_TIMEOUT_S": "10",
                 "LEDGER_CONNECTOR_RECORD_MARGIN_S": "2", "LEDGER_LOG_LEVEL": "WARNING"}


def measure(bootstrap: str, prefix: str, folder: Path, say: Say, *, dispatches: int = 3000,
            call_ms: int = 20, partitions: int = 12, in_flight: int | None = None
            ) -> tuple[dict[str, float], float]:
    """(figures, the connector's peak RSS in MiB)."""
    from ledger_lab.harness.sandbox import SandboxProc
    from ledger_lab.harness.stack import Stack

    s = Settings(kafka_bootstrap=bootstrap, topic_prefix=prefix, partitions=partitions,
                 replication_factor=1)
    topics.require_matching(topics.create_topics(bootstrap, s))
    folder.mkdir(parents=True, exist_ok=True)
    sandbox = SandboxProc(folder / "sandbox.db", latency_ms=call_ms)
    (folder / "stack").mkdir(exist_ok=True)
    stack = Stack(s, folder / "stack",
                  processor_env=throwaway_approver_env())
    env = dict(CONNECTOR_ENV)
    if in_flight:
        env["LEDGER_CONNECTOR_MAX_IN_FLIGHT"] = str(in_flight)
    run = uuid.uuid4().hex[:6]
    try:
        connector = stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                                    env=env)
        db = sqlite3.connect(f"file:{folder / 'sandbox.db'}?mode=ro", uri=True)

        def payments() -> int:
            return int(db.execute("SELECT COUNT(*) FROM effects").fetchone()[0])

        warmup = max(dispatches // 2, 1)
        say(f"warm-up: {warmup:,} intents, not measured")
        for i in range(warmup):
            stack.submit_nowait(f"acme/refund/warm-{run}-{i}", {"amount": i + 1}, "payments")
        stack.producer.flush()
        _wait(lambda: payments() >= warmup, 600, "the warm-up payments")
        cpu_before = cpu_seconds(connector.pid)
        say(f"{dispatches:,} intents")
        started = time.monotonic()
        for i in range(dispatches):
            stack.submit_nowait(f"acme/refund/b{run}-{i}", {"amount": i + 1}, "payments")
        stack.producer.flush()
        _wait(lambda: payments() >= warmup + dispatches, 600, "every payment",
              lambda: say(f"{payments() - warmup:,} of {dispatches:,} payments"))
        wall = time.monotonic() - started
        cpu = cpu_seconds(connector.pid) - cpu_before
        rss = peak_rss_mb(connector.pid)
        first, last = db.execute(
            "SELECT MIN(created_at), MAX(created_at) FROM effects "
            "WHERE idempotency_key LIKE ?", (f"acme/refund/b{run}-%",)).fetchone()
        doubled = db.execute(
            "SELECT COUNT(*) FROM (SELECT idempotency_key FROM effects "
            "GROUP BY idempotency_key HAVING COUNT(*) > 1)").fetchone()[0]
        db.close()
    finally:
        stack.close()
        sandbox.stop()
    if doubled:
        raise BenchError(f"connector: {doubled} key(s) paid twice (sandbox {folder})")
    span = max(last - first, 1e-3)
    return {"payments_per_s": dispatches / span, "span_s": span, "end_to_end_s": wall,
            "call_ms": float(call_ms),
            "connector_cpu_us_per_dispatch": cpu / dispatches * 1e6}, rss


def _wait(done: Callable[[], bool], timeout_s: float, what: str,
          progress: Callable[[], None] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last_said = time.monotonic()
    while not done():
        if time.monotonic() > deadline:
            raise BenchError(f"connector: timed out waiting for {what}")
        if progress is not None and time.monotonic() - last_said > 5:
            progress()
            last_said = time.monotonic()
        time.sleep(0.1)


class ConnectorArm:
    name = "connector"
    repeated = False

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        sizes = ctx.sizes

        def say(line: str) -> None:
            ctx.progress(f"{self.name}: {line}", 0, 1)

        figures, rss = measure(ctx.bootstrap, f"{ctx.prefix}-conn", ctx.folder("connector"),
                               say, dispatches=sizes.dispatches, call_ms=sizes.call_ms,
                               partitions=ctx.partitions)
        return ArmResult(self.name, repetition, figures, rss,
                         {"dispatches": sizes.dispatches, "mode": "grant-only",
                          "keys_paid_twice": 0})
