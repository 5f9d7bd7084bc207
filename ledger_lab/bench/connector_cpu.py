"""The connector's CPU per dispatch without Kafka:

    python -m ledger_lab.bench.connector_cpu [--dispatches N] [--call-ms MS] [--target T]
                                             [--profile FILE]

The real ``ConnectorWorker`` loop (its core, ``DispatchFeed``, codec, pool, metrics, logs and
the real ``HttpTarget`` against the payments sandbox in a child process) runs with a fake
consumer and producer behind confluent-kafka's interface. The fake stands in for the broker
and the processor: every dispatch is on the topic at the start (N on fresh keys, as in the
bench's connector arm); each claim is acknowledged at the next ``poll`` and answered by a
Grant read from the dispatch topic; each outcome is acknowledged. So every dispatch costs
what it costs against Kafka, minus librdkafka's own threads: two records decoded (the
dispatch and its grant), two encoded and produced (the claim and the outcome), two delivery
reports, a commit, and the call.

Reported: process CPU (user + system, every thread) over the measured N, less the fake's own
work (decoding what was produced, encoding the grants: timed afterwards on a sample of the
records, since reading a CPU clock per record costs more than the work), per dispatch; and
dispatches per second of wall time. The sandbox's own CPU over the same dispatches (its
process, from /proc) is reported beside it, never in it: a remote API's would be elsewhere.
A warm-up round of N/2 is not measured. ``--target sleep`` replaces the HTTP target by one
that sleeps ``call_ms`` (the connector's Kafka side alone); ``--profile`` writes a cProfile
of the loop's thread (answers are read, and most outcomes produced, on the target's
exchange loop thread; new connections opened on pool threads).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import confluent_kafka
from confluent_kafka import TopicPartition

from ledger_lab.harness.records import FakeMessage
from ledger_stream.config import Settings
from ledger_stream.connector import collector
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.connector.runtime import ConnectorWorker
from ledger_stream.connector.target import EffectRequest, Target
from ledger_stream.domain import events as ev
from ledger_stream.domain.events import OutcomeStatus
from ledger_stream.serde import AvroCodec

PARTITIONS = 12
SAMPLE = 1000
LEASE_MS = 30_000


class FakeBroker:
    """The dispatch topic, the processor's answers to claims, and the count of outcomes.
    Its own work (what Kafka and the processor would do: decoding produced records,
    encoding grants) is subtracted from the figure: ``cost_s`` per produced record."""

    def __init__(self, topic: str, codec: AvroCodec) -> None:
        self.topic, self.codec = topic, codec
        self._queue: collections.deque[FakeMessage] = collections.deque()
        self._ready = threading.Condition()
        self._next = [0] * PARTITIONS
        self._partition_of: dict[str, int] = {}
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.outcome_count = 0
        self.produced_count = 0
        self.sample: list[bytes] = []  # produced records, to time the fake's own work

    def append(self, values: list[tuple[str, bytes]]) -> None:
        """Records (key, value) on the dispatch topic, each key's partition by its hash."""
        with self._ready:
            for key, value in values:
                p = self._partition_of.setdefault(key, hash(key) % PARTITIONS)
                self._queue.append(FakeMessage(self.topic, p, self._next[p],
                                               int(time.time() * 1000), None, value))
                self._next[p] += 1
            self._ready.notify_all()

    def take(self, limit: int, timeout_s: float) -> list[FakeMessage]:
        with self._ready:
            if not self._queue and timeout_s > 0:
                self._ready.wait(timeout_s)
            return [self._queue.popleft() for _ in range(min(limit, len(self._queue)))]

    def produced(self, value: bytes) -> None:
        """The processor's side: a claim is granted, an outcome counted."""
        self.produced_count += 1
        if len(self.sample) < SAMPLE:
            self.sample.append(value)
        event = self.codec.decode(value)
        if isinstance(event, ev.AttemptClaim):
            now = int(time.time() * 1000)
            grant = ev.Grant(event.key, event.attempt, event.claim_id, now + LEASE_MS, now)
            self.append([(event.key, self.codec.encode(grant))])
        elif isinstance(event, ev.AttemptOutcome):
            self.outcomes[event.status.value] += 1
            self.outcome_count += 1

    def cost_s(self) -> float:
        """CPU seconds ``produced`` takes per record, timed on the sample in a broker of its
        own (not per call: a CPU clock read is a system call, tens of µs on a loaded VM)."""
        scratch = FakeBroker(self.topic, self.codec)
        values = self.sample * max(1, 2000 // max(len(self.sample), 1))
        started = time.thread_time()
        for value in values:
            scratch.produced(value)
        return (time.thread_time() - started) / len(values)


class FakeConsumer:
    """confluent_kafka.Consumer's calls the connector's feed makes."""

    def __init__(self, broker: FakeBroker) -> None:
        self._broker = broker
        self._on_assign: Callable[..., None] | None = None
        self.committed: dict[int, int] = {}

    def subscribe(self, topics: list[str], on_assign: Callable[..., None],
                  **_: Any) -> None:
        self._on_assign = on_assign

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, 0  # nothing on the topic before the assignment: no backlog

    def poll(self, timeout: float) -> FakeMessage | None:
        if self._on_assign is not None:
            assign, self._on_assign = self._on_assign, None
            assign(self, [TopicPartition(self._broker.topic, p) for p in range(PARTITIONS)])
        got = self._broker.take(1, timeout)
        return got[0] if got else None

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        return self._broker.take(num_messages, 0)

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> None:
        for tp in offsets:
            self.committed[tp.partition] = tp.offset

    def close(self) -> None:
        pass


class FakeProducer:
    """confluent_kafka.Producer's calls the connector makes: a produce is acknowledged at the
    next poll or flush, as librdkafka's delivery reports are served."""

    def __init__(self, broker: FakeBroker) -> None:
        self._broker = broker
        self._pending: list[tuple[bytes, Callable[..., None] | None]] = []

    def produce(self, topic: str, value: bytes, key: bytes,
                on_delivery: Callable[..., None] | None = None, **_: Any) -> None:
        self._pending.append((value, on_delivery))

    def poll(self, timeout: float = 0) -> int:
        pending, self._pending = self._pending, []
        for value, on_delivery in pending:
            self._broker.produced(value)
            if on_delivery is not None:
                on_delivery(None, None)
        return len(pending)

    def flush(self, timeout: float = 0) -> int:
        self.poll(0)
        return 0


class SleepTarget(Target):
    """A target that takes ``call_ms`` per call and always succeeds."""

    def __init__(self, call_ms: int) -> None:
        self.name, self._call_s, self._n = "payments", call_ms / 1000, 0

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        time.sleep(self._call_s)
        return f"pay_{request.attempt_id}"

    def classify(self, error: Exception) -> OutcomeStatus:
        return OutcomeStatus.UNKNOWN

    def lookup(self, key: str, timeout_s: float) -> str | None:
        return None


def dispatches(codec: AvroCodec, run: str, n: int) -> list[tuple[str, bytes]]:
    """N encoded dispatches on fresh keys, attempt 1, as the processor writes them."""
    out = []
    now = int(time.time() * 1000)
    for i in range(n):
        key = f"acme/refund/{run}-{i}"
        args = f'{{"amount":{i + 1}}}'
        d = ev.Dispatch(f"d-{run}-{i}", key, 1, f"i-{run}-{i}", "acme", "refund", "payments",
                        args, f"h{i}", "", 0, now)
        out.append((key, codec.encode(d)))
    return out


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) process ``pid`` has used; 0 without /proc or a pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(make_target: Callable[[], Target], n: int, in_flight: int, say: Callable[[str], None],
            profile: Path | None = None, sandbox_pid: int | None = None) -> dict[str, Any]:
    settings = Settings(kafka_bootstrap="fake:9092", topic_prefix="cpu")
    codec = AvroCodec()
    broker = FakeBroker(settings.topic("dispatch"), codec)
    options = ConnectorOptions(lease_ms=LEASE_MS, call_timeout_s=10, record_margin_s=2,
                               max_in_flight=in_flight)
    worker = ConnectorWorker(settings, "fake:9092", make_target(), options, codec,
                             producer=cast(confluent_kafka.Producer, FakeProducer(broker)),
                             consumer=cast(confluent_kafka.Consumer, FakeConsumer(broker)))
    stop = threading.Event()
    figures: dict[str, Any] = {}
    run = os.urandom(4).hex()
    warm, measured = dispatches(codec, f"w{run}", max(n // 2, 1)), dispatches(codec, run, n)

    def drive() -> None:
        try:
            broker.append(warm)
            _until(lambda: broker.outcome_count >= len(warm), stop)
            cpu, records, started = _cpu(), broker.produced_count, time.monotonic()
            sandbox_cpu = process_cpu(sandbox_pid)
            broker.append(measured)
            _until(lambda: broker.outcome_count >= len(warm) + n, stop)
            wall = time.monotonic() - started
            used = _cpu() - cpu
            sandbox_used = process_cpu(sandbox_pid) - sandbox_cpu
            harness = (broker.produced_count - records) * broker.cost_s()
            figures.update(dispatches=n, in_flight=in_flight, wall_s=wall,
                           dispatches_per_s=n / wall,
                           cpu_us_per_dispatch=(used - harness) / n * 1e6,
                           harness_us_per_dispatch=harness / n * 1e6,
                           sandbox_us_per_dispatch=sandbox_used / n * 1e6,
                           outcomes=dict(broker.outcomes))
        finally:
            stop.set()

    collector.tune()  # as `ledger-stream connector` does before it serves
    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    if profile is not None:  # the loop's thread, warm-up included
        profiler = cProfile.Profile()
        profiler.runcall(worker.serve, stop)
        profiler.dump_stats(profile)
    else:
        worker.serve(stop)
    driver.join()
    if not figures:
        raise SystemExit("error: the run did not finish")
    return figures


def _until(done: Callable[[], bool], stop: threading.Event) -> None:
    deadline = time.monotonic() + 600
    while not done() and not stop.is_set():
        if time.monotonic() > deadline:
            raise SystemExit("error: timed out")
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.bench.connector_cpu",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dispatches", type=int, default=4000, metavar="N")
    parser.add_argument("--call-ms", type=int, default=20, metavar="MS")
    parser.add_argument("--in-flight", type=int, default=ConnectorOptions().max_in_flight)
    parser.add_argument("--target", choices=("http", "sleep"), default="http")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", type=Path, default=None, metavar="FILE")
    args = parser.parse_args(argv)
    from ledger_stream.logs import configure_logging

    configure_logging("WARNING")  # as the bench's connector runs

    def say(line: str) -> None:
        print(f"[connector-cpu] {line}", file=sys.stderr, flush=True)

    sandbox = None
    if args.target == "http":
        from connectors.http import HttpTarget
        from ledger_lab.harness.sandbox import MODULE_COMMAND, SandboxProc

        folder = Path(tempfile.mkdtemp(prefix="ledger-connector-cpu-"))
        # Its log (a line per request) off: reading it is the harness's work, not the
        # connector's, and it cost this process about 30 µs of CPU per dispatch.
        sandbox = SandboxProc(folder / "sandbox.db", latency_ms=args.call_ms,
                              command=(*MODULE_COMMAND, "--log-level", "WARNING"))
        url = sandbox.url

        def make_target() -> Target:
            return HttpTarget(name="payments", base_url=url)
    else:
        def make_target() -> Target:
            return SleepTarget(args.call_ms)
    try:
        for r in range(args.repeat):
            f = measure(make_target, args.dispatches, args.in_flight, say, args.profile,
                        sandbox.pid if sandbox is not None else None)
            print(f"run {r + 1}: {f['dispatches']:,} dispatches, {args.call_ms} ms "
                  f"{args.target} target, {f['in_flight']} in flight: "
                  f"{f['cpu_us_per_dispatch']:.0f} µs CPU per dispatch, "
                  f"{f['dispatches_per_s']:,.0f}/s (harness {f['harness_us_per_dispatch']:.0f}"
                  f" µs, sandbox {f['sandbox_us_per_dispatch']:.0f} µs of its own, outcomes "
                  f"{f['outcomes']})", flush=True)
    finally:
        if sandbox is not None:
            sandbox.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
