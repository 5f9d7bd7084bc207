"""Raw echo arms: the ceiling the ledger is compared with, on the same topics and broker.

``bytes-echo`` consumes the workload and produces each record unchanged (the limit of the
broker and the Python client); ``avro-echo`` decodes each value to its domain event and
encodes it again with the project's serde (the ceiling of any Python processor of Avro
events here). Both consume in batches, keep the key and partition, and checkpoint like the
processor at least once: every second the producer is flushed, then offsets are committed.

Run as ``python -m ledger_stream.bench.arms.raw_echo`` (the arm does), until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer

from ledger_stream.bench.context import ArmResult, BenchContext
from ledger_stream.bench.processes import Child
from ledger_stream.bench.topics import create_plain_topics, end_offsets, read_span
from ledger_stream.kafka.producer import producer_config
from ledger_stream.serde import AvroCodec

BATCH = 500
CHECKPOINT_S = 1.0  # the processor's default commit interval


def _transform(mode: str) -> Callable[[bytes], bytes] | None:
    if mode == "bytes":
        return None
    codec = AvroCodec()

    def avro(value: bytes) -> bytes:
        return codec.encode(codec.decode(value))

    return avro


def echo(bootstrap: str, source: str, out: str, group: str, mode: str) -> None:
    """Consume ``source`` from the start, produce to ``out`` until SIGTERM, then commit."""
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    transform = _transform(mode)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "log_level": 3})
    producer = Producer(producer_config(bootstrap, **{"log_level": 3}))
    consumer.subscribe([source])
    produce, poll = producer.produce, producer.poll
    next_checkpoint = time.monotonic() + CHECKPOINT_S
    dirty = False
    while not stopping:
        # Wait for the first record only, then take what is already fetched: a batch
        # without the fixed wait of consume(n, timeout) when fewer than n are there.
        first = consumer.poll(0.1)
        batch = [first, *consumer.consume(BATCH - 1, 0)] if first is not None else []
        for msg in batch:
            if msg.error():
                continue
            value = msg.value()
            if value is None:
                continue
            if transform is not None:
                value = transform(value)
            try:
                produce(out, value=value, key=msg.key())
            except BufferError:
                producer.flush(5)
                produce(out, value=value, key=msg.key())
            dirty = True
        poll(0)
        if dirty and time.monotonic() >= next_checkpoint:
            producer.flush(30)
            consumer.commit(asynchronous=False)
            next_checkpoint, dirty = time.monotonic() + CHECKPOINT_S, False
    producer.flush(30)
    if dirty:
        consumer.commit(asynchronous=False)
    consumer.close()


def start_echo(bootstrap: str, source: str, out: str, group: str, mode: str,
               log_dir: Any) -> Child:
    return Child(["--bootstrap", bootstrap, "--source", source, "--out", out, "--group",
                  group, "--mode", mode], log_dir / f"{group}.log",
                 module="ledger_stream.bench.arms.raw_echo")


class EchoArm:
    """``bytes-echo`` or ``avro-echo`` over the shared workload."""

    repeated = True

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.name = f"{mode}-echo"

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        out = f"{ctx.prefix}.echo-{self.mode}"
        create_plain_topics(ctx.bootstrap, [out], ctx.partitions)
        start = end_offsets(ctx.bootstrap, out)
        group = f"{ctx.prefix}-{self.name}-{uuid.uuid4().hex[:6]}"
        expected = len(ctx.workload)
        child = start_echo(ctx.bootstrap, ctx.source_topic, out, group, self.mode,
                           ctx.folder("logs"))
        try:
            cpu = ctx.drain(child, group, ctx.source_topic, expected, self.name)
        finally:
            rss = child.stop()
        span = read_span(ctx.bootstrap, out, start, expected)
        return ArmResult(self.name, repetition,
                         {"records_per_s": span.rate(), "seconds": span.seconds, **cpu},
                         rss, {"records": span.count})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for flag in ("--bootstrap", "--source", "--out", "--group"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--mode", choices=("bytes", "avro"), required=True)
    args = parser.parse_args()
    echo(args.bootstrap, args.source, args.out, args.group, args.mode)


if __name__ == "__main__":
    main()
