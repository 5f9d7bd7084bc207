"""The SDK as agents feel it: one ``LedgerClient`` against a full stack (processor, payments
sandbox taking ``call_ms`` per call, its HTTP connector), sequential calls and then
``agents`` threads sharing the client (one process, many agents, as a worker pool runs).

Measured, in one run so the ratios compare like with like:

- the raw Kafka round trip: produce one record (acks=all), read it back;
- a duplicate ``submit`` (the ledger's own round trip: intent in, original receipt out);
- a new client's first ``submit`` of a duplicate (its Kafka clients start cold);
- a fresh ``submit`` through the connector and the sandbox (budget: the call time plus four
  raw round trips);
- ``status`` by reading the key's partition, and through ``ledger-stream view`` at each of
  ``status_sizes`` receipts (status_lookup.py), sequential and from 64 threads.

Latencies in ms (p50/p99 nearest rank); rates per second over the wall time of the batch.
The arm first runs WARM_UP_ROUNDS discarded rounds of the same measurement (without the
view's sizes), on topics of their own: a fresh broker's JVM has not compiled its hot paths,
and the arm alone (``--arms sdk``) would otherwise measure a cold broker.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from ledger_lab.bench import status_lookup
from ledger_lab.bench.arms.connector import CONNECTOR_ENV
from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.processes import peak_rss_mb, throwaway_approver_env
from ledger_stream.config import Settings
from ledger_stream.kafka import topics

Say = Callable[[str], None]
WARM_UP_ROUNDS = 1  # as the submit timeline's --warm-up default


def timed(n: int, call: Callable[[int], object]) -> list[float]:
    """Seconds per call of ``call(0..n-1)``, one at a time."""
    out = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - started)
    return out


def at(seconds: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` of ``seconds``, in ms."""
    ordered = sorted(seconds)
    return 1000 * ordered[min(len(ordered), max(math.ceil(q * len(ordered)), 1)) - 1]


def _latencies(name: str, seconds: Sequence[float]) -> dict[str, float]:
    return {f"{name}_p50_ms": at(seconds, 0.5), f"{name}_p99_ms": at(seconds, 0.99)}


def _concurrently(agents: int, calls: int, call: Callable[[int], object]
                  ) -> tuple[list[float], float]:
    """(seconds per call, calls per second) of ``calls`` calls from ``agents`` threads."""
    with concurrent.futures.ThreadPoolExecutor(agents) as pool:
        began = time.perf_counter()
        spent = list(pool.map(lambda i: timed(1, lambda _: call(i))[0], range(calls)))
        return spent, calls / (time.perf_counter() - began)


def raw_round_trips(bootstrap: str, topic: str, calls: int) -> list[float]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw",
                         "fetch.wait.max.ms": 10, "log_level": 3})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        consumer.poll(0.5)

        def round_trip(_: int) -> None:
            producer.produce(topic, b"x", key=b"k", partition=0)
            producer.flush()
            while consumer.poll(1.0) is None:
                pass
        round_trip(0)
        return timed(calls, round_trip)
    finally:
        consumer.close()


def measure(bootstrap: str, prefix: str, folder: Path, say: Say, *, calls: int = 200,
            agents: int = 64, call_ms: int = 20, status_sizes: Sequence[int] = (),
            guarantee: str = "exactly-once") -> tuple[dict[str, float], float]:
    """(figures, peak RSS of the processor and connector in MiB). ``guarantee``: the
    processor's (exactly once, the product's default, unless asked)."""
    from ledger_lab.harness.sandbox import SandboxProc
    from ledger_lab.harness.stack import Stack
    from ledger_stream import LedgerClient, Workflow, operation_key

    s = Settings(kafka_bootstrap=bootstrap, topic_prefix=prefix, partitions=3,
                 replication_factor=1)
    topics.require_matching(topics.create_topics(bootstrap, s))
    say("raw round trips")
    raw = raw_round_trips(bootstrap, s.topic("alerts"), calls)
    figures = {"call_ms": float(call_ms), **_latencies("raw", raw)}
    sandbox = SandboxProc(folder / "sandbox.db", latency_ms=call_ms)
    (folder / "stack").mkdir(parents=True, exist_ok=True)
    stack = Stack(s, folder / "stack",
                  processor_env={**throwaway_approver_env(),
                                 "LEDGER_PROCESSING_GUARANTEE": guarantee})
    few = max(20, calls // 4)
    try:
        # Production timings: the test suite's 1.5 s call timeout, with 64 agents on a busy
        # machine, sent a slow call to an operator (unknown, then not found at a target that
        # does not deduplicate), and the arm stopped.
        connector = stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                                    env=CONNECTOR_ENV)
        workflow = Workflow("bench-sdk", "1.0", "thread", "refund")
        # The duplicates below are the processor's answers (the receipt cache off); the
        # cache's own are measured apart, by a client that created its key.
        uncached = s.model_copy(update={"sdk_receipt_cache": False})
        with LedgerClient(uncached) as client, LedgerClient(s) as caching:
            key = operation_key("acme", "refund", "warm-up")

            def duplicate(_: int) -> None:
                client.submit(client.intent(key, "refund", "payments", {"n": 0},
                                            workflow=workflow), wait=60)

            def fresh(i: int) -> None:
                k = operation_key("acme", "refund", uuid.uuid4().hex[:12])
                client.submit(client.intent(k, "refund", "payments", {"n": i},
                                            workflow=workflow), wait=60)

            say("warm-up (the first submit)")
            duplicate(0)
            say("duplicate submits")
            figures.update(_latencies("duplicate", timed(calls, duplicate)))
            say("duplicate submits from the receipt cache")
            figures.update(_latencies("duplicate_cached", _cached_duplicates(
                caching, workflow, calls)))
            say("a new client's first submit (a duplicate)")
            figures.update(_latencies("first_duplicate", _first_submits(
                s, key, workflow, max(10, calls // 20))))
            say("fresh submits")
            figures.update(_latencies("fresh", timed(few, fresh)))
            say("status (reading the partition)")
            figures.update(_latencies("status_scan", timed(few, lambda _: client.status(key))))
            say(f"{agents} agents: duplicate submits")
            spent, rate = _concurrently(agents, agents * 4, duplicate)
            figures.update({**_latencies(f"duplicate_{agents}", spent),
                            f"duplicate_{agents}_per_s": rate})
            say(f"{agents} agents: fresh submits")
            spent, rate = _concurrently(agents, agents * 2, fresh)
            figures.update({**_latencies(f"fresh_{agents}", spent),
                            f"fresh_{agents}_per_s": rate})
        rss = max(peak_rss_mb(stack.processor.pid), peak_rss_mb(connector.pid))
    finally:
        stack.close()
        sandbox.stop()
    for size in status_sizes:
        found = status_lookup.measure(bootstrap, size, calls, 10, timed, say,
                                      prefix=f"{prefix}-status-{size}", agents=agents)
        figures.update({
            **_latencies(f"status_view_{size}", found.view),
            **_latencies(f"status_view_{agents}_{size}", found.view_64),
            f"status_view_{agents}_per_s_{size}": found.view_64_per_s,
            **_latencies(f"status_scan_{size}", found.scan),
            f"view_catch_up_per_s_{size}": found.catch_up_per_s,
            f"view_rss_mb_{size}": found.view_rss_mb})
        rss = max(rss, found.view_rss_mb)
    return figures, rss


def _cached_duplicates(client: Any, workflow: Any, n: int) -> list[float]:
    """Seconds of ``n`` duplicates of a key ``client`` created and saw succeed: answered
    from its receipt cache (their intents still produced)."""
    from ledger_stream import operation_key

    key = operation_key("acme", "refund", "cached")
    client.submit(client.intent(key, "refund", "payments", {"n": 0}, workflow=workflow),
                  wait=60)
    return timed(n, lambda _: client.submit(client.intent(
        key, "refund", "payments", {"n": 0}, workflow=workflow), wait=60))


def _first_submits(settings: Settings, key: str, workflow: Any, n: int) -> list[float]:
    """Seconds of each of ``n`` new clients' first submit (a duplicate of ``key``), as an
    agent process that has just started makes it: its receipts subscription, its producer
    and its admin client meet Kafka for the first time. Creating and closing the client are
    not timed."""
    from ledger_stream import LedgerClient

    out = []
    for _ in range(n):
        with LedgerClient(settings) as client:
            intent = client.intent(key, "refund", "payments", {"n": 0}, workflow=workflow)
            started = time.perf_counter()
            client.submit(intent, wait=60)
            out.append(time.perf_counter() - started)
    return out


class SdkArm:
    name = "sdk"
    repeated = False

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        sizes = ctx.sizes
        steps = ["raw round trips", "warm-up (the first submit)", "duplicate submits",
                 "duplicate submits from the receipt cache",
                 "a new client's first submit (a duplicate)", "fresh submits",
                 "status (reading the partition)"]
        per_round = len(steps) + 2
        total = (per_round + 1) * WARM_UP_ROUNDS + per_round + 3 * len(sizes.status_sizes)
        done = [0]

        def say(line: str) -> None:
            ctx.progress(f"{self.name}: {line}", done[0], total)
            done[0] += 1

        def round_(name: str, status_sizes: Sequence[int]) -> tuple[dict[str, float], float]:
            return measure(ctx.bootstrap, f"{ctx.prefix}-{name}", ctx.folder(name), say,
                           calls=sizes.sdk_calls, agents=sizes.sdk_agents,
                           call_ms=sizes.call_ms, status_sizes=status_sizes)

        for n in range(1, WARM_UP_ROUNDS + 1):
            say(f"warm-up round {n} of {WARM_UP_ROUNDS} (discarded)")
            round_(f"sdk-warm-{n}", ())
        figures, rss = round_("sdk", sizes.status_sizes)
        return ArmResult(self.name, repetition, figures, rss,
                         {"calls": sizes.sdk_calls, "agents": sizes.sdk_agents,
                          "status_sizes": list(sizes.status_sizes),
                          "warm_up_rounds": WARM_UP_ROUNDS})
