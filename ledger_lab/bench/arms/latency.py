"""Latency at half load: open-loop arrivals, intent -> receipt through the running processor,
and the raw Kafka round trip (produce, a bytes echo consumer->producer, read back) at the
same rate with the same records.

Open loop: intent i is due at ``start + i / rate`` whatever happened to the others, and its
latency is measured from that due time, so a stalled pipeline shows as latency instead of
as a slower sender (no coordinated omission). The sender and the reader are two threads of
this process; the processor and the echo are child processes. The producers on both paths
use the project's settings (``linger.ms`` 5, idempotent).

The percentiles leave out the records due in the first ``WARM_UP_S`` of the run (half of a
shorter run), on both paths: they measure the child's start, not its latency. The processor
is a fraction of a second old when the load begins (one record answered is all it has
seen), and its first flushes to partitions it has not written yet took 180-372 ms, against
about 10 ms later (2026-12-03); the queue that forms then drains for two to three seconds.
How long that queue lasts grows with the rate: on 2026-12-05 the machine was quicker, half
load was 5,900/s instead of 2,600/s, the processor's first flushes took 200-730 ms (against
4-15 ms a few seconds later) and the queue drained 5.5 s after the load began, so a 3 s
warm-up measured the start again (p99 1.0 s, against 94-105 ms from the sixth second on).
The warm-up is 8 s of a 28 s run. The whole run's p99 is reported beside
(``*_p99_whole_ms``), and the number of records the percentiles cover (``*_measured``).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable

from confluent_kafka import OFFSET_END, Consumer, Producer
from confluent_kafka import TopicPartition as TP

from ledger_lab.bench.arms.ledger import LedgerArm
from ledger_lab.bench.arms.raw_echo import start_echo
from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.latency_detail import cdf, summed
from ledger_lab.bench.processes import Child, CpuWindow, processor
from ledger_lab.bench.topics import create_ledger_topics, create_plain_topics
from ledger_lab.bench.workload import Workload, WorkloadSpec, generate
from ledger_stream.config import Settings
from ledger_stream.kafka.producer import producer_config
from ledger_stream.serde import AvroCodec

LOAD = 0.5  # of the measured ledger maximum
WARM_UP_S = 8.0  # left out of the percentiles (a start's queue drained in 2-5.5 s)
RESEND_S = 3.0
READY_TIMEOUT_S = 120.0
Match = Callable[[bytes], bytes | None]  # output value -> the input's identity


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = math.ceil(q * len(sorted_values))
    return sorted_values[min(len(sorted_values), max(rank, 1)) - 1]


class OpenLoop:
    """Send ``records`` to ``in_topic`` at ``rate``/s; time each one's answer on
    ``out_topic`` (found by ``match``) from its due time."""

    def __init__(self, bootstrap: str, in_topic: str, out_topic: str, match: Match) -> None:
        self.bootstrap, self.in_topic, self.out_topic, self.match = (
            bootstrap, in_topic, out_topic, match)
        self.arrived: dict[bytes, float] = {}
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "log_level": 3,
                                   "group.id": f"bench-latency-{uuid.uuid4().hex}",
                                   "enable.auto.commit": False})
        meta = self._consumer.list_topics(out_topic, timeout=10).topics[out_topic]
        self._consumer.assign([TP(out_topic, p, OFFSET_END) for p in meta.partitions])
        self._producer = Producer(producer_config(bootstrap, **{"log_level": 3}))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        consumer, match, arrived = self._consumer, self.match, self.arrived
        while not self._stop.is_set():
            first = consumer.poll(0.05)
            if first is None:
                continue
            now = time.perf_counter()
            for msg in (first, *consumer.consume(500, 0)):
                if not msg.error() and (value := msg.value()) is not None:
                    identity = match(value)
                    if identity is not None:
                        arrived.setdefault(identity, now)

    def await_one(self, key: bytes, value: bytes, identity: bytes, alive: Child) -> None:
        """Send one record and wait for its answer: the path is up and warm."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        resend_at = 0.0
        while identity not in self.arrived:
            alive.require_alive("latency path")
            if time.monotonic() > deadline:
                raise BenchError(f"no answer on {self.out_topic} within {READY_TIMEOUT_S} s")
            if time.monotonic() >= resend_at:
                # Again every few seconds: an answer that came before the reader's OFFSET_END
                # was resolved is never seen (a CI run on a loaded machine waited 120 s).
                self._producer.produce(self.in_topic, value=value, key=key)
                self._producer.flush(10)
                resend_at = time.monotonic() + RESEND_S
            time.sleep(0.05)

    def run(self, records: list[tuple[bytes, bytes, bytes]], rate: float
            ) -> list[tuple[float, float]]:
        """(seconds from the start its record was due, latency in ms) of every answered
        record, in the order they were due (unanswered ones are left out)."""
        produce, poll, topic = self._producer.produce, self._producer.poll, self.in_topic
        start = time.perf_counter() + 0.05
        due_times: dict[bytes, float] = {}
        for i, (key, value, identity) in enumerate(records):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            due_times[identity] = due
            produce(topic, value=value, key=key)
            poll(0)
        self._producer.flush(30)
        deadline = time.monotonic() + 30
        while len(self.arrived) < len(due_times) + 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        self._reader.join(5)
        self._consumer.close()
        return [(due - start, (self.arrived[i] - due) * 1000) for i, due in due_times.items()
                if i in self.arrived]


def latency_figures(prefix: str, answered: list[tuple[float, float]], sent: int, warm_up_s: float
            ) -> dict[str, float]:
    """Percentiles of the records due after ``warm_up_s`` (``answered``: (due, ms) pairs),
    and the whole run's p99."""
    steady = sorted(ms for due, ms in answered if due >= warm_up_s)
    if not steady:
        raise BenchError(f"{prefix}: no answers after the {warm_up_s:.1f} s warm-up")
    return {f"{prefix}_p50_ms": percentile(steady, 0.50),
            f"{prefix}_p99_ms": percentile(steady, 0.99),
            f"{prefix}_p999_ms": percentile(steady, 0.999),
            f"{prefix}_p99_whole_ms": percentile(sorted(ms for _, ms in answered), 0.99),
            f"{prefix}_measured": float(len(steady)),
            f"{prefix}_answered": float(len(answered)), f"{prefix}_sent": float(sent)}


class LatencyArm:
    name = "latency"
    repeated = False

    def __init__(self, guarantee: str = "at-least-once") -> None:
        self.guarantee = guarantee
        self._stages: dict[str, object] | None = None  # the processor's, once it ran

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        rate = self.rate(ctx)
        count = max(50, int(rate * ctx.sizes.latency_seconds))
        spec = ctx.workload.spec
        workload = generate(WorkloadSpec(count + 1, spec.duplicate_share, spec.conflict_share,
                                         seed=spec.seed + 1, key_space="latency"))
        # The raw path first: the broker is quiet for it; the ledger's run leaves work
        # behind (changelog compaction) that would only slow the raw path down.
        ctx.progress(self.name, 0, 2)
        raw, raw_cpu, raw_rss = self._raw(ctx, workload, rate)
        ctx.progress(self.name, 1, 2)
        ledger, ledger_cpu, ledger_rss = self._ledger(ctx, workload, rate)
        ctx.progress(self.name, 2, 2)
        warm_up_s = min(WARM_UP_S, count / rate / 2)
        distribution = {name: cdf([ms for due, ms in answered if due >= warm_up_s])
                        for name, answered in (("ledger", ledger), ("raw", raw))}
        figures = {"rate_per_s": rate, "warm_up_s": warm_up_s,
                   **latency_figures("ledger", ledger, count, warm_up_s),
                   **latency_figures("raw", raw, count, warm_up_s),
                   **{f"ledger_{k}": v for k, v in ledger_cpu.items()},
                   **{f"raw_{k}": v for k, v in raw_cpu.items()}}
        return ArmResult(self.name, repetition, figures, max(ledger_rss, raw_rss),
                         {"guarantee": self.guarantee, "load": LOAD, "intents": count,
                          "ledger_rss_mb": ledger_rss, "raw_echo_rss_mb": raw_rss,
                          "cdf_ms": distribution, "ledger_batch_stages": self._stages})

    def rate(self, ctx: BenchContext) -> float:
        """The arrivals per second: ``--latency-rate``, else half the ledger's throughput."""
        return ctx.sizes.latency_rate or LOAD * self._max_rate(ctx)

    def _max_rate(self, ctx: BenchContext) -> float:
        if "ledger-max-rate" not in ctx.shared:  # the ledger arm was not selected: measure
            run = LedgerArm(self.guarantee).run(ctx, 0)
            ctx.shared["ledger-max-rate"] = run.figures["decisions_per_s"]
        return float(ctx.shared["ledger-max-rate"])

    def _ledger(self, ctx: BenchContext, workload: Workload,
                rate: float) -> tuple[list[tuple[float, float]], dict[str, float], float]:
        prefix = f"{ctx.prefix}-lat"
        settings = Settings(kafka_bootstrap=ctx.bootstrap, topic_prefix=prefix,
                            partitions=ctx.partitions)
        create_ledger_topics(ctx.bootstrap, settings)
        codec = AvroCodec()
        ids = [codec.decode(v).event_id.encode() for _, v in workload.records]
        records = [(k, v, i) for (k, v), i in zip(workload.records, ids, strict=True)]

        def match(value: bytes) -> bytes | None:
            return str(codec.decode_record(value)[1]["intent_event_id"]).encode()

        group = f"{prefix}-processor"
        log = ctx.folder("logs") / f"{group}.log"
        child = processor(ctx.bootstrap, prefix, group, ctx.folder(f"state-{group}"),
                          log, self.guarantee, ctx.partitions,
                          env={"LEDGER_LOG_LEVEL": "INFO"})  # its stage lines
        loop = OpenLoop(ctx.bootstrap, settings.topic("intents"), settings.topic("receipts"),
                        match)
        measured = _measure(child, loop, records, rate)
        self._stages = summed(log)  # the whole run's, its start included
        return measured

    def _raw(self, ctx: BenchContext, workload: Workload,
             rate: float) -> tuple[list[tuple[float, float]], dict[str, float], float]:
        raw_in, raw_out = f"{ctx.prefix}-lat.raw-in", f"{ctx.prefix}-lat.raw-out"
        create_plain_topics(ctx.bootstrap, [raw_in, raw_out], ctx.partitions)
        records = [(k, v, v) for k, v in workload.records]  # values are unique
        child = start_echo(ctx.bootstrap, raw_in, raw_out, f"{ctx.prefix}-lat-echo", "bytes",
                           ctx.folder("logs"))
        loop = OpenLoop(ctx.bootstrap, raw_in, raw_out, lambda value: value)
        return _measure(child, loop, records, rate)


def _measure(child: Child, loop: OpenLoop, records: list[tuple[bytes, bytes, bytes]],
             rate: float) -> tuple[list[tuple[float, float]], dict[str, float], float]:
    """(latencies, the child's CPU figures, its peak RSS): one warm-up record answered,
    then the open loop at ``rate``; the child is stopped whatever happens."""
    try:
        loop.await_one(*records[0], alive=child)
        window = CpuWindow(child.pid)
        window.sample()
        latencies = loop.run(records[1:], rate)
        window.sample()
    finally:
        rss = child.stop()
    return latencies, window.figures(len(records) - 1), rss
