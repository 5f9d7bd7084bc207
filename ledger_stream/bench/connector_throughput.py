"""One connector instance against a target that does not deduplicate (every call waits for
its Grant from the processor), the target taking a fixed time per call:

    python -m ledger_stream.bench.connector_throughput [--dispatches N] [--call-ms MS]

Starts its own local Kafka (1 node), the ledger topics (12 partitions), a processor, the
payments sandbox with ``--latency-ms`` and one HTTP connector for it (not declared
deduplicating: grant-only), waits for one warm-up payment, then produces N intents on fresh
keys at once and measures, from the sandbox's own records (its SQLite file, read-only), how
fast the payments were made: N over the span between the first and the last payment's
creation time. Checks that every key has exactly one payment. Prints the rate, the connector's
CPU per dispatch and its peak RSS.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_stream.bench.connector_throughput",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dispatches", type=int, default=3000, metavar="N",
                        help="intents on fresh keys (default 3000)")
    parser.add_argument("--call-ms", type=int, default=20, metavar="MS",
                        help="the target's time per call (default 20)")
    parser.add_argument("--in-flight", type=int, default=None, metavar="N",
                        help="the connector's dispatches at once (default: its own, "
                        "LEDGER_CONNECTOR_MAX_IN_FLIGHT)")
    args = parser.parse_args(argv)
    if args.dispatches < 1 or args.call_ms < 0:
        parser.error("--dispatches must be at least 1 and --call-ms not negative")
    os.environ.setdefault("LEDGER_DEV_MODE", "1")  # a private, throwaway stack

    from ledger_stream.bench.processes import cpu_seconds, peak_rss_mb
    from ledger_stream.config import Settings
    from ledger_stream.kafka import topics
    from ledger_stream.kafka.local.ephemeral import kafka_for
    from ledger_stream.testing.sandbox import SandboxProc
    from ledger_stream.testing.stack import Stack

    def say(line: str) -> None:
        print(f"[connector-throughput] {line}", file=sys.stderr, flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="ledger-connector-bench-"))
    with kafka_for(Settings(kafka_bootstrap=None), say) as (bootstrap, _):
        s = Settings(kafka_bootstrap=bootstrap, topic_prefix="connector-bench", partitions=12,
                     replication_factor=1)
        topics.require_matching(topics.create_topics(bootstrap, s))
        sandbox = SandboxProc(tmp / "sandbox.db", latency_ms=args.call_ms)
        (tmp / "stack").mkdir()
        stack = Stack(s, tmp / "stack")
        # Production timings, not the test suite's short ones.
        env = {"LEDGER_CONNECTOR_LEASE_MS": "30000", "LEDGER_CONNECTOR_CALL_TIMEOUT_S": "10",
               "LEDGER_CONNECTOR_RECORD_MARGIN_S": "2", "LEDGER_LOG_LEVEL": "WARNING"}
        if args.in_flight:
            env["LEDGER_CONNECTOR_MAX_IN_FLIGHT"] = str(args.in_flight)
        try:
            connector = stack.connector("http", "--name", "payments", "--base-url",
                                        sandbox.url, env=env)
            db = sqlite3.connect(f"file:{tmp / 'sandbox.db'}?mode=ro", uri=True)

            def payments() -> int:
                return int(db.execute("SELECT COUNT(*) FROM effects").fetchone()[0])

            say("warm-up payment")
            stack.submit(f"acme/refund/warm-{uuid.uuid4().hex[:6]}", {"amount": 1}, "payments")
            _wait(lambda: payments() >= 1, 120, "the warm-up payment")
            cpu_before = cpu_seconds(connector.pid)
            say(f"{args.dispatches:,} intents")
            started = time.monotonic()
            for i in range(args.dispatches):
                stack.submit_nowait(f"acme/refund/b{i}-{uuid.uuid4().hex[:6]}",
                                    {"amount": i + 1}, "payments")
            stack.producer.flush()
            _wait(lambda: payments() >= args.dispatches + 1, 600, "every payment",
                  lambda: say(f"{payments() - 1:,} payments"))
            wall = time.monotonic() - started
            cpu = cpu_seconds(connector.pid) - cpu_before
            rss = peak_rss_mb(connector.pid)
            first, last = db.execute(
                "SELECT MIN(created_at), MAX(created_at) FROM effects "
                "WHERE idempotency_key LIKE 'acme/refund/b%'").fetchone()
            doubled = db.execute(
                "SELECT COUNT(*) FROM (SELECT idempotency_key FROM effects "
                "GROUP BY idempotency_key HAVING COUNT(*) > 1)").fetchone()[0]
            db.close()
        finally:
            stack.close()
            sandbox.stop()
    span = last - first
    print(f"dispatches        {args.dispatches:,} at {args.call_ms} ms per call, grant-only")
    print(f"payments/s        {args.dispatches / span:,.0f} (the sandbox's own timestamps, "
          f"first to last payment: {span:.2f} s)")
    print(f"end to end        {wall:.2f} s from the first intent to the last payment")
    print(f"connector CPU     {cpu / args.dispatches * 1e6:,.0f} µs per dispatch; "
          f"peak RSS {rss:.0f} MiB")
    print(f"keys paid twice   {doubled}")
    return 1 if doubled else 0


def _wait(done: Callable[[], bool], timeout_s: float, what: str,
          progress: Callable[[], None] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last_said = time.monotonic()
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        if progress is not None and time.monotonic() - last_said > 5:
            progress()
            last_said = time.monotonic()
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
