"""Raw echo arms: the ceiling the ledger is compared with, on the same topics and broker.

``bytes-echo`` consumes the workload and produces each record unchanged (the limit of the
broker and the Python client); ``avro-echo`` decodes each value to its domain event and
encodes it again with the project's serde (the ceiling of any Python processor of Avro
events here). Both consume in batches, keep the key and partition, and checkpoint like the
processor at least once: every second the producer is flushed, then offsets are committed.

``io-floor`` makes, per intent, the library calls the processor makes for it, with no
decision between them: the ledger's floor in this design (Python over confluent-kafka,
fastavro and rocksdict). It reads the record's time and headers, decodes the intent as
``avro-echo`` does, checks its key's partition and its arguments' hash, reads the key's row
(this batch's, else a RocksDB get, JSON-decoded when found), and then, as the processor
would: for a fresh key, encodes a dispatch and a receipt, encodes a row and produces the
three records (the row to the changelog at the input's partition, with the processor's
headers); for a duplicate (same arguments' hash), encodes and produces a receipt; for a
conflict, a receipt and an alert. The events encoded are what the real ``decide`` outputs
for the first intent read (types and sizes), not each record's own. It keeps the
processor's rhythm: a checkpoint per poll of up to ``max_batch`` records (each partition's
clock record, a flush whose delivery reports it follows, a commit, then one RocksDB write
per partition: rows, timer entries, clock and changelog offset). Left out: the metrics.

Run as ``python -m ledger_lab.bench.arms.raw_echo`` (the arm does), until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer

from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.processes import Child
from ledger_lab.bench.topics import create_plain_topics, end_offsets, read_span
from ledger_stream.domain.decide import decide
from ledger_stream.domain.events import Intent
from ledger_stream.domain.keys import sha256_hex
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import FIELD_INDEX, absent
from ledger_stream.domain.values import replace
from ledger_stream.kafka.message import position
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.producer import producer_config
from ledger_stream.processor import changelog
from ledger_stream.processor.changelog import Positions
from ledger_stream.serde import AvroCodec
from ledger_stream.settings import ProcessorSettings
from ledger_stream.state.base import StoreBatch, TimerEntry
from ledger_stream.state.rocksdb import RocksDBPartitionStore
from ledger_stream.state.rows import decode_values, encode_values

BATCH = 500
CHECKPOINT_S = 1.0  # the echoes' checkpoint: flush, then commit, every second
MAX_BATCH = ProcessorSettings.model_fields["max_batch"].default  # io-floor: as the processor


class _Floor:
    """``io-floor``'s work per record and per checkpoint (see the module's docstring)."""

    def __init__(self, out: str, folder: Path, partitions: int) -> None:
        self._codec = AvroCodec()
        self._topics = dict(zip(("Dispatch", "Receipt", "Alert", "changelog"),
                                floor_topics(out), strict=True))
        self._row = absent("").to_row()
        self._partitions = partitions
        self._stores = [RocksDBPartitionStore(folder / f"p{p}", p) for p in range(partitions)]
        # What the next commit writes, per partition (the processor's overlays).
        self._rows: dict[int, dict[str, bytes]] = {}
        self._timers: dict[int, list[TimerEntry]] = {}
        self._outputs: dict[str, list[tuple[str, Any]]] = {}
        self._group = f"{out}-floor"
        self._clocks: dict[int, int] = {}  # partition -> latest record time in this batch
        self._changelog_next: dict[int, int] = {}
        self.errors: list[KafkaError] = []

    def _templates(self, intent: Intent) -> dict[str, list[tuple[str, Any]]]:
        """(topic, event) of what the real ``decide`` outputs for a fresh intent, its
        duplicate and a conflicting one, from the first intent read: encoding these in place
        of each record's own gives the processor's encodes (types and sizes) without its
        decision."""
        policy = Policy()
        fresh = decide(absent(intent.key), intent, policy, intent.at_ms)
        other = json.dumps({"io-floor": "other arguments"})
        conflicting = replace(intent, args_json=other, args_hash=sha256_hex(other))
        return {kind: [(self._topics[type(o).__name__], o) for o in d.outputs]
                for kind, d in (
                    ("fresh", fresh),
                    ("duplicate", decide(fresh.state, intent, policy, intent.at_ms)),
                    ("conflict", decide(fresh.state, conflicting, policy, intent.at_ms)))}

    def handle(self, msg: Message, produce: Callable[..., None]) -> None:
        """The calls the processor makes for ``msg``: a fresh intent (no row for its key)
        gets a dispatch, a receipt, a row in the changelog and in the store; a duplicate (a
        row with its arguments' hash) a receipt; a conflict (another hash) a receipt and an
        alert. The row is read as the processor reads it: this batch's, else the store's."""
        _, partition, offset = position(msg)
        self._clocks[partition] = max(self._clocks.get(partition, 0), msg.timestamp()[1])
        msg.headers()  # the processor reads the trace context from them
        key = msg.key() or b""
        intent = self._codec.decode(msg.value())
        if partition_for(key, self._partitions) != partition:
            raise SystemExit("io-floor: a record outside its key's partition")
        if sha256_hex(intent.args_json) != intent.args_hash:  # the processor's validation
            raise SystemExit("io-floor: an intent whose hash is not its arguments'")
        if not self._outputs:
            self._outputs = self._templates(intent)
        rows = self._rows.setdefault(partition, {})
        row = rows.get(intent.key) or self._stores[partition].get(intent.key)
        if row is None:
            kind = "fresh"
        else:
            same = decode_values(row)[_ARGS_HASH] == intent.args_hash
            kind = "duplicate" if same else "conflict"
        for topic, out in self._outputs[kind]:
            produce(topic, value=self._codec.encode(out), key=key)
        if kind != "fresh":
            return
        values = self._row.copy()
        values[_KEY], values[_ARGS_HASH] = intent.key, intent.args_hash
        row = rows[intent.key] = encode_values(values)
        positions = Positions(offset + 1, -1)  # what the processor's headers carry
        produce(self._topics["changelog"], value=row, key=key, partition=partition,
                headers=[*changelog.headers(self._group, positions),
                         changelog.due_header(("lease", intent.at_ms))])
        self._timers.setdefault(partition, []).append((intent.at_ms, intent.key))

    def before_commit(self, produce: Callable[..., None]) -> None:
        """Each partition's clock record, as the processor appends one per batch."""
        for partition, clock in self._clocks.items():
            produce(self._topics["changelog"], value=changelog.clock_value(clock),
                    key=changelog.CLOCK_KEY, partition=partition)

    def committed(self) -> None:
        """Each partition's rows, timer entries, clock and changelog offset, in one write."""
        for partition, clock in self._clocks.items():
            self._stores[partition].write(StoreBatch(
                self._rows.get(partition, {}), (), self._timers.get(partition, ()), clock,
                self._changelog_next.get(partition)))
        self._rows, self._timers, self._clocks = {}, {}, {}

    def report(self, err: KafkaError | None, msg: Message) -> None:
        """The processor's delivery report: errors kept, changelog offsets followed."""
        if err is not None:
            self.errors.append(err)
        elif msg.topic() == self._topics["changelog"]:
            partition, offset = msg.partition() or 0, msg.offset() or 0
            if offset + 1 > self._changelog_next.get(partition, 0):
                self._changelog_next[partition] = offset + 1


_KEY, _ARGS_HASH = FIELD_INDEX["key"], FIELD_INDEX["args_hash"]


def floor_topics(out: str) -> list[str]:
    """io-floor's outputs: dispatch, receipts (measured: one per intent), alerts, changelog."""
    return [f"{out}-dispatch", f"{out}-receipts", f"{out}-alerts", f"{out}-changelog"]


def _transform(mode: str) -> Callable[[bytes], bytes] | None:
    if mode == "bytes":
        return None
    codec = AvroCodec()

    def avro(value: bytes) -> bytes:
        return codec.encode(codec.decode(value))

    return avro


def echo(bootstrap: str, source: str, out: str, group: str, mode: str,
         folder: Path | None = None, partitions: int = 0) -> None:
    """Consume ``source`` from the start, produce to ``out`` until SIGTERM, then commit.
    ``io-floor`` (mode ``io``) keeps its stores in ``folder``, one per partition."""
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    transform = _transform(mode)
    floor = _Floor(out, folder, partitions) if mode == "io" and folder else None
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "log_level": 3})
    extra: dict[str, Any] = {"on_delivery": floor.report} if floor else {}
    producer = Producer({**producer_config(bootstrap, **{"log_level": 3}), **extra})
    # io-floor: the processor's rhythm, a checkpoint per poll of up to max_batch records.
    size, every_s = (MAX_BATCH, 0.0) if floor else (BATCH, CHECKPOINT_S)
    consumer.subscribe([source])
    poll = producer.poll

    def send(topic: str, **record: Any) -> None:
        try:
            producer.produce(topic, **record)
        except BufferError:
            producer.flush(5)
            producer.produce(topic, **record)

    def checkpoint() -> None:
        if floor is not None:
            floor.before_commit(send)
        producer.flush(30)
        if floor is not None and floor.errors:
            raise SystemExit(f"io-floor: delivery failed: {floor.errors[0]}")
        consumer.commit(asynchronous=False)
        if floor is not None:
            floor.committed()

    next_checkpoint = time.monotonic() + every_s
    dirty = False
    while not stopping:
        # Wait for the first record only, then take what is already fetched: a batch
        # without the fixed wait of consume(n, timeout) when fewer than n are there.
        first = consumer.poll(0.1)
        batch = [first, *consumer.consume(size - 1, 0)] if first is not None else []
        for msg in batch:
            if msg.error():
                continue
            value = msg.value()
            if value is None:
                continue
            if floor is not None:
                floor.handle(msg, send)
            else:
                send(out, value=value if transform is None else transform(value),
                     key=msg.key())
            dirty = True
        poll(0)
        if dirty and time.monotonic() >= next_checkpoint:
            checkpoint()
            next_checkpoint, dirty = time.monotonic() + every_s, False
    producer.flush(30)
    if dirty:
        checkpoint()
    consumer.close()


def start_echo(bootstrap: str, source: str, out: str, group: str, mode: str,
               log_dir: Any, folder: Path | None = None, partitions: int = 0) -> Child:
    extra = ["--folder", str(folder), "--partitions", str(partitions)] if folder else []
    return Child(["--bootstrap", bootstrap, "--source", source, "--out", out, "--group",
                  group, "--mode", mode, *extra], log_dir / f"{group}.log",
                 module="ledger_lab.bench.arms.raw_echo")


class EchoArm:
    """``bytes-echo``, ``avro-echo`` or ``io-floor`` (mode ``io``) over the shared workload."""

    repeated = True

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.name = "io-floor" if mode == "io" else f"{mode}-echo"

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        out = f"{ctx.prefix}.echo-{self.mode}"
        group = f"{ctx.prefix}-{self.name}-{uuid.uuid4().hex[:6]}"
        folder = ctx.folder(f"state-{group}") if self.mode == "io" else None
        outputs = floor_topics(out) if folder else [out]
        create_plain_topics(ctx.bootstrap, outputs, ctx.partitions)
        out_measured = outputs[1] if folder else out  # io-floor: its receipts, one per intent
        start = end_offsets(ctx.bootstrap, out_measured)
        expected = len(ctx.workload)
        child = start_echo(ctx.bootstrap, ctx.source_topic, out, group, self.mode,
                           ctx.folder("logs"), folder, ctx.partitions)
        try:
            cpu = ctx.drain(child, group, ctx.source_topic, expected, self.name)
        finally:
            rss = child.stop()
        span = read_span(ctx.bootstrap, out_measured, start, expected)
        return ArmResult(self.name, repetition,
                         {"records_per_s": span.rate(), "seconds": span.seconds, **cpu},
                         rss, {"records": span.count})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for flag in ("--bootstrap", "--source", "--out", "--group"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--mode", choices=("bytes", "avro", "io"), required=True)
    parser.add_argument("--folder", type=Path, help="io: where its stores go")
    parser.add_argument("--partitions", type=int, default=0, help="io: of the source topic")
    args = parser.parse_args()
    if args.mode == "io" and (args.folder is None or args.partitions < 1):
        parser.error("--mode io needs --folder and --partitions")
    echo(args.bootstrap, args.source, args.out, args.group, args.mode, args.folder,
         args.partitions)


if __name__ == "__main__":
    main()
