"""The SDK as an agent feels it, sequential calls on one client:

    python -m ledger_stream.bench.sdk_latency [--calls N]

Starts its own local Kafka (1 node), the ledger topics, a processor, the payments sandbox and
an HTTP connector for it, then measures, one call at a time: the raw Kafka round trip (produce
one record with acks=all, read it back), a duplicate ``submit`` (the ledger's own round trip),
a fresh ``submit`` (through connector and sandbox) and ``status``. Prints p50/p90/p99 per
operation; compare ratios to the raw round trip of the same run (docs/benchmarks.md). The
stack is private and thrown away, so it runs in development mode (public approval secret).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition


def percentiles(seconds: list[float]) -> str:
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return (f"p50 {at(0.5):7.1f}  p90 {at(0.9):7.1f}  p99 {at(0.99):7.1f} ms "
            f"(n={len(ordered)})")


def timed(n: int, call: Callable[[int], object]) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - started)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_stream.bench.sdk_latency",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, metavar="N",
                        help="calls per operation (fresh submits and status: N/4, at least "
                             "20; default 200)")
    parser.add_argument("--status-sizes", default="0,200000,2000000", metavar="N,N,...",
                        help="receipts in the topic when status is measured through the "
                        "receipts view (and by reading the partition, 10 calls); empty to "
                        "skip (default 0,200000,2000000)")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    try:
        sizes = [int(n) for n in args.status_sizes.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--status-sizes must be integers separated by commas, got "
                     f"{args.status_sizes!r}")
    if any(n < 0 for n in sizes):
        parser.error("--status-sizes must not be negative")
    os.environ.setdefault("LEDGER_DEV_MODE", "1")  # a private, throwaway stack

    from ledger_stream import LedgerClient, Workflow, operation_key
    from ledger_stream.bench import status_lookup
    from ledger_stream.config import Settings
    from ledger_stream.kafka import topics
    from ledger_stream.kafka.local.ephemeral import kafka_for
    from ledger_stream.testing.sandbox import SandboxProc
    from ledger_stream.testing.stack import Stack

    def say(line: str) -> None:
        print(f"[sdk-latency] {line}", file=sys.stderr, flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="ledger-sdk-latency-"))
    with kafka_for(Settings(kafka_bootstrap=None), say) as (bootstrap, _):
        s = Settings(kafka_bootstrap=bootstrap, topic_prefix="sdk-latency",
                     partitions=3, replication_factor=1)
        topics.require_matching(topics.create_topics(bootstrap, s))
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw",
                             "fetch.wait.max.ms": 10})
        consumer.assign([TopicPartition(s.topic("alerts"), 0, 0)])
        consumer.poll(0.5)

        def raw_round_trip(_: int) -> None:
            producer.produce(s.topic("alerts"), b"x", key=b"k", partition=0)
            producer.flush()
            while consumer.poll(1.0) is None:
                pass

        say("raw round trips")
        raw = timed(args.calls, raw_round_trip)
        consumer.close()
        (tmp / "stack").mkdir()
        sandbox = SandboxProc(tmp / "sandbox.db")
        stack = Stack(s, tmp / "stack")
        try:
            stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
            workflow = Workflow("sdk-latency", "1.0", "thread", "refund")
            few = max(20, args.calls // 4)
            with LedgerClient(s) as client:
                key = operation_key("acme", "refund", "warm-up")

                def duplicate(_: int) -> None:
                    client.submit(client.intent(key, "refund", "payments", {"n": 0},
                                                workflow=workflow), wait=60)

                def fresh(i: int) -> None:
                    k = operation_key("acme", "refund", uuid.uuid4().hex[:10])
                    client.submit(client.intent(k, "refund", "payments", {"n": i},
                                                workflow=workflow), wait=60)

                say("warm-up (first submit)")
                duplicate(0)
                say("duplicate submits")
                dup = timed(args.calls, duplicate)
                say("fresh submits")
                new = timed(few, fresh)
                say("status")
                looked = timed(few, lambda _: client.status(key))
        finally:
            stack.close()
            sandbox.stop()
        lookups = [status_lookup.measure(bootstrap, n, args.calls, 10, timed, say)
                   for n in sizes]
        print(f"raw round trip    {percentiles(raw)}")
        print(f"duplicate submit  {percentiles(dup)}")
        print(f"fresh submit      {percentiles(new)}")
        print(f"status (scan)     {percentiles(looked)}")
        for found in lookups:
            print(f"status at {found.receipts:>9,} receipts: view {percentiles(found.view)}")
            print(f"{'':30}64 threads {percentiles(found.view_64)}, "
                  f"{found.view_64_per_s:,.0f} status/s")
            print(f"{'':30}scan {percentiles(found.scan)}")
            print(f"{'':30}view caught up in {found.catch_up_s:.1f} s "
                  f"({found.catch_up_per_s:,.0f} receipts/s), peak RSS "
                  f"{found.view_rss_mb:.0f} MiB")
        return 0


if __name__ == "__main__":
    sys.exit(main())
