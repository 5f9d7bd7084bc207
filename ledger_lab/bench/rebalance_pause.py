"""How long partitions stop being decided while a second processor joins the group: eager
rebalancing (the classic protocol) against incremental (the KIP-848 consumer protocol).

    python -m ledger_lab.bench.rebalance_pause [--rate N] [--before S] [--after S]

Starts its own local Kafka (1 node). Per protocol, under a topic prefix and group of its own:
processor A, then intents on fresh keys at N per second, evenly spaced; S seconds later
processor B joins; the load goes on for S more seconds (``--after``). Then every receipt
is read (read_committed) with its timestamp, which the processor sets when it produces the
receipt. Per partition, the longest time between consecutive receipts from just before B
started to the end of the load is that partition's pause; the same measure over the
seconds before B started is its baseline (the load's own spacing plus batching). Eager,
every partition of A stops for the rebalance; incremental, only those that move to B
should, each for B's assignment and restore.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import TopicPartition

from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.processes import Child, processor
from ledger_lab.bench.topics import create_ledger_topics, end_offsets
from ledger_lab.bench.workload import WorkloadSpec, generate
from ledger_stream.config import Settings
from ledger_stream.kafka.clients import Consumer, Producer
from ledger_stream.kafka.message import fetched
from ledger_stream.kafka.producer import producer_config

PROTOCOLS = ("classic", "consumer")
PARTITIONS = 12
Say = Callable[[str], None]


def measure(bootstrap: str, protocol: str, folder: Path, say: Say, *, rate: float,
            before_s: float, after_s: float) -> dict[str, float]:
    """The pause figures of one protocol (milliseconds)."""
    run = uuid.uuid4().hex[:6]
    prefix, group = f"pause-{protocol}-{run}", f"pause-{protocol}-{run}"
    create_ledger_topics(bootstrap, Settings(kafka_bootstrap=bootstrap, topic_prefix=prefix,
                                             partitions=PARTITIONS))
    total = int(rate * (before_s + after_s))
    records = generate(WorkloadSpec(intents=total, duplicate_share=0, conflict_share=0,
                                    key_space=f"pause-{run}")).records
    env = {"LEDGER_GROUP_PROTOCOL": protocol, "LEDGER_LOG_LEVEL": "INFO"}  # logs: who holds what
    state = folder / protocol

    def start(name: str) -> Child:
        return processor(bootstrap, prefix, group, state / name, folder / f"{protocol}-{name}.log",
                         "exactly-once", PARTITIONS, env=env)

    producer = Producer(producer_config(bootstrap, **{"linger.ms": 0}))
    children = [start("a")]
    joined_ms = 0
    try:
        say(f"{protocol}: processor A, {total:,} intents at {rate:g}/s")
        started = time.monotonic()
        for i, (key, value) in enumerate(records):
            if not joined_ms and time.monotonic() - started >= before_s:
                joined_ms = int(time.time() * 1000)
                say(f"{protocol}: processor B joins")
                children.append(start("b"))
            wait = started + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            producer.produce(f"{prefix}.intents", value=value, key=key)
            producer.poll(0)
            for child in children:
                child.require_alive(f"{protocol} processor")
        if producer.flush(30):
            raise BenchError("intents left unacknowledged after 30 s")
        ended_ms = int(time.time() * 1000)
        _await_receipts(bootstrap, f"{prefix}.receipts", total, children)
    finally:
        for child in children:
            child.stop()
    stamps = _receipt_times(bootstrap, f"{prefix}.receipts")
    pauses = [_longest_gap(times, joined_ms - 1000, ended_ms) for times in stamps.values()]
    baselines = [_longest_gap(times, joined_ms - int(before_s * 500), joined_ms)
                 for times in stamps.values()]
    base = statistics.median(baselines)
    say(f"{protocol}: pause per partition (ms): "
        + ", ".join(f"{p}: {pause:,.0f}" for p, pause in zip(stamps, pauses, strict=True)))
    return {"partitions": float(len(pauses)), "baseline_median_ms": base,
            "pause_min_ms": min(pauses), "pause_median_ms": statistics.median(pauses),
            "pause_max_ms": max(pauses),
            "partitions_paused": float(sum(p > max(4 * base, 500) for p in pauses))}


def _longest_gap(times: list[int], start_ms: int, end_ms: int) -> float:
    """The longest time between consecutive receipts within [start, end], the window's own
    edges counting as receipts."""
    inside = [start_ms, *[t for t in times if start_ms <= t <= end_ms], end_ms]
    return float(max(b - a for a, b in zip(inside, inside[1:], strict=False)))


def _await_receipts(bootstrap: str, topic: str, expected: int, children: list[Child]) -> None:
    deadline = time.monotonic() + 120
    while sum(end_offsets(bootstrap, topic).values()) < expected:
        for child in children:
            child.require_alive("processor")
        if time.monotonic() > deadline:
            raise BenchError(f"{topic}: fewer than {expected} receipts after 120 s")
        time.sleep(0.5)


def _receipt_times(bootstrap: str, topic: str) -> dict[int, list[int]]:
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"pause-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "log_level": 3})
    times: dict[int, list[int]] = {p: [] for p in ends}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + 60
        while any(tp.offset < ends[tp.partition] for tp in
                  consumer.position([TopicPartition(topic, p) for p in ends])):
            if time.monotonic() > deadline:
                raise BenchError(f"{topic}: not read to its end within 60 s")
            for msg in fetched(consumer, 5000, 0.5):
                partition = msg.partition()
                if not msg.error() and partition is not None:
                    times[partition].append(msg.timestamp()[1])
    finally:
        consumer.close()
    return {p: sorted(t) for p, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.bench.rebalance_pause",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=120.0, metavar="N",
                        help="intents per second (default 120)")
    parser.add_argument("--before", type=float, default=10.0, metavar="S",
                        help="seconds of load before processor B joins (default 10)")
    parser.add_argument("--after", type=float, default=15.0, metavar="S",
                        help="seconds of load after it joins (default 15)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), metavar="P,P",
                        help="group protocols to measure, in order (default classic,consumer)")
    args = parser.parse_args(argv)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if args.rate <= 0 or args.before < 2 or args.after < 2:
        parser.error("--rate must be positive, --before and --after at least 2 seconds")
    if not protocols or any(p not in PROTOCOLS for p in protocols):
        parser.error(f"--protocols takes {' and '.join(PROTOCOLS)}, got {args.protocols!r}")

    from ledger_lab.local_kafka.ephemeral import kafka_for

    def say(line: str) -> None:
        print(f"[rebalance-pause] {line}", file=sys.stderr, flush=True)

    results: dict[str, dict[str, float]] = {}
    try:
        with kafka_for(Settings(kafka_bootstrap=None), say) as (bootstrap, _):
            folder = Path(tempfile.mkdtemp(prefix="ledger-pause-"))
            for protocol in protocols:
                results[protocol] = measure(bootstrap, protocol, folder, say, rate=args.rate,
                                            before_s=args.before, after_s=args.after)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{'ms':24}" + "".join(f"{p:>12}" for p in protocols))
    for name in ("baseline_median_ms", "pause_min_ms", "pause_median_ms", "pause_max_ms",
                 "partitions_paused"):
        print(f"{name:24}" + "".join(f"{results[p][name]:>12,.0f}" for p in protocols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
