"""The CPU harness: the processor's CPU per decision, without Kafka, stage by stage.

The bench workload (``workload.generate``) is replayed through the processor's real
``Batch``, ``Checkpoint``, RocksDB stores (one per partition, in a temporary folder) and
:class:`~ledger_stream.processor.step.LedgerStep`, at least once and exactly once. Only the
Kafka clients are replaced (``cpu_clients``): records arrive as polls of ``max_batch``
records, partition by partition as a fetch returns them, and the produced records land in an
in-memory log whose SHA-256 (``digest``) says whether a change to the loop changed a byte of
its outputs. The echo's and the io-floor's per-record work run over the same records.

Figures are µs of the main thread's CPU time per record (librdkafka's work is on its own
threads in the processor; here there is none). Each arm runs ``passes`` times on fresh
stores and the fastest pass counts (the machine is shared: the fastest is the one least
disturbed). The per-stage figures split that figure in the shares an instrumented pass
measured (one per round, the least disturbed counts): each stage's own wall time (a call
inside another stage counts for the inner one), over the pass's total; ``other`` is what no
stage covers (the batch's loop, overlays, metrics, headers). A thread-time clock read costs
about 2 µs here, too much to put around each call; the timers' own cost (about 0.2 µs per
timed call) is in the shares.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ledger_lab.bench.arms.raw_echo import _Floor
from ledger_lab.bench.cpu_clients import (
    BOOK,
    HarnessAtLeastOnce,
    HarnessExactlyOnce,
    LogBook,
    LogConsumer,
    LogProducer,
    log_digest,
)
from ledger_lab.bench.workload import BASE_AT_MS, WorkloadSpec, generate
from ledger_lab.fuzz.seeded import BASE_MS, CHUNK, PARTITIONS, Generator
from ledger_lab.fuzz.seeded import INTENTS as FUZZ_INTENTS
from ledger_lab.harness.records import FakeMessage
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor import collector
from ledger_stream.processor import partition as partition_module
from ledger_stream.processor import step as step_module
from ledger_stream.processor.batch import Batch, in_time_order
from ledger_stream.processor.changelog import Positions
from ledger_stream.processor.checkpoint import Checkpoint
from ledger_stream.processor.delivery import Delivery
from ledger_stream.processor.step import LedgerStep
from ledger_stream.serde import AvroCodec
from ledger_stream.settings import ProcessorSettings
from ledger_stream.state import RocksDBPartitionStore

INTENTS, ATTEMPTS = "cpu.intents", "cpu.attempts"
ROLES = ("dispatch", "receipts", "alerts", "dlq", "attempts", "changelog", "intents")
STAGES = ("decode", "validate", "decide", "encode", "store", "produce", "commit")
MAX_BATCH = ProcessorSettings.model_fields["max_batch"].default
PREGRANT_MS = ProcessorSettings.model_fields["pregrant_lease_ms"].default
GROUP = "cpu-harness"
Polls = list[list[FakeMessage]]


def polls_of(spec: WorkloadSpec, partitions: int, max_batch: int = MAX_BATCH) -> Polls:
    """The workload as the consumer would hand it over: polls of ``max_batch`` records, each
    poll's records partition by partition (offsets and broker times as a log would give)."""
    offsets = [0] * partitions
    records = []
    for index, (key, value) in enumerate(generate(spec).records):
        partition = partition_for(key, partitions)
        records.append(FakeMessage(INTENTS, partition, offsets[partition],
                                   BASE_AT_MS + index, key, value))
        offsets[partition] += 1
    return [sorted(records[i:i + max_batch], key=lambda m: m.partition())
            for i in range(0, len(records), max_batch)]


@dataclass
class Stages:
    """Each stage's own seconds: a call timed inside another is taken off the outer one."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    _inner: list[float] = field(default_factory=list)

    def timed(self, stage: str, call: Callable[..., Any]) -> Callable[..., Any]:
        clock, seconds, inner = time.perf_counter, self.seconds, self._inner

        def run(*args: Any, **kwargs: Any) -> Any:
            inner.append(0.0)
            started = clock()
            try:
                return call(*args, **kwargs)
            finally:
                spent = clock() - started
                seconds[stage] += spent - inner.pop()
                if inner:
                    inner[-1] += spent

        return run


@contextmanager
def _patched(target: Any, name: str, value: Any) -> Iterator[None]:
    before = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, before)


def mixed_polls(cases: int, seed: int, partitions: int = PARTITIONS,
                chunk: int = CHUNK) -> Polls:
    """The fuzzer's hostile stream (``fuzz.seeded.Generator``: every input type, Ticks and
    freezes, poison, records in a foreign partition) as polls of ``chunk`` records with a
    broker clock one second apart per record (so deadlines come and timers fire): what
    ``digest`` compares beside the bench workload, since the workload holds intents only."""
    rng, codec = random.Random(seed), AvroCodec()
    generator = Generator(rng, codec)
    offsets: dict[tuple[str, int], int] = {}
    records = []
    for index in range(cases):
        topic, key, value, _ = generator.record()
        topic = INTENTS if topic == FUZZ_INTENTS else ATTEMPTS
        partition = partition_for(key, partitions) if key and rng.random() < 0.95 \
            else rng.randrange(partitions)
        offset = offsets.get((topic, partition), 0)
        offsets[(topic, partition)] = offset + 1
        records.append(FakeMessage(topic, partition, offset, BASE_MS + index * 1_000, key,
                                   value))
    return [sorted(records[i:i + chunk], key=lambda m: (m.partition(), m.topic()))
            for i in range(0, len(records), chunk)]


def digest(polls: Polls, partitions: int, exactly_once: bool,
           policy: Policy | None = None, pregrant_ms: int | None = None) -> str:
    """SHA-256 of everything the processor's loop produces for ``polls`` (every output topic
    and the changelog, per partition, in order)."""
    with tempfile.TemporaryDirectory(prefix="cpu-digest-") as tmp:
        run = ProcessorRun(Path(tmp), partitions, exactly_once, policy, pregrant_ms)
        try:
            for records in polls:
                run.batch(records)
            return log_digest(run.log())
        finally:
            run.close()


class ProcessorRun:
    """One pass of the real batch loop over ``polls`` on fresh stores in ``folder``, deciding
    as a processor with the default settings does under its guarantee: exactly once, first
    Dispatches pre-granted for ``pregrant_ms`` (None: the setting's default); at least once,
    never."""

    def __init__(self, folder: Path, partitions: int, exactly_once: bool,
                 policy: Policy | None = None, pregrant_ms: int | None = None) -> None:
        LogProducer.partitions = partitions
        self.codec = AvroCodec()
        pregrant = PREGRANT_MS if pregrant_ms is None else pregrant_ms
        policy = replace(policy or Policy(), pregrant_lease_ms=pregrant if exactly_once else 0)
        self.step = LedgerStep(policy, self.codec,
                               {INTENTS: "intents", ATTEMPTS: "attempts"}, partitions)
        self.stores = {p: RocksDBPartitionStore(folder / f"p{p}", p) for p in range(partitions)}
        self.committed: dict[int, Positions] = {}
        self.consumer = LogConsumer()
        self.book = LogBook()  # every producer's records, in append order
        config: dict[str, Any] = {BOOK: self.book}
        if exactly_once:
            config["transactional.id"] = GROUP
        self.delivery: Delivery = (HarnessExactlyOnce(config, "changelog") if exactly_once
                                   else HarnessAtLeastOnce(config, "changelog",
                                                           self.consumer))  # type: ignore[arg-type]
        self.checkpoint = Checkpoint(self.delivery, self.consumer,  # type: ignore[arg-type]
                                     self.step, {r: r for r in ROLES}, GROUP, "cpu")

    def batch(self, records: list[FakeMessage]) -> None:
        """What ``Processor._iteration`` does with one poll."""
        sent_ms = records[-1].timestamp()[1]  # fixed, so the outputs are the same each run
        batch = Batch(self.step, self.stores, self.committed,  # type: ignore[arg-type]
                      (INTENTS, ATTEMPTS), "cpu-harness", self.consumer, sent_ms)
        batch.add_all(in_time_order(records))  # type: ignore[arg-type]
        self.checkpoint.run(batch)
        for partition in batch.overlays:
            self.committed[partition] = batch.positions(partition)

    def instrumented(self, stages: Stages) -> list[Any]:
        """Timers around each stage's calls (undone when the context ends)."""
        timed = stages.timed
        plans: list[Any] = [
            (self.codec, "decode", timed("decode", self.codec.decode)),
            (self.codec, "encode", timed("encode", self.codec.encode)),
            (step_module, "key_partition", timed("validate", step_module.key_partition)),
            (step_module, "invalid_reason", timed("validate", step_module.invalid_reason)),
            (step_module, "decide", timed("decide", step_module.decide)),
            (partition_module, "decode_row", timed("store", partition_module.decode_row)),
            (step_module, "encode_row", timed("store", step_module.encode_row)),
            (self.delivery, "send", timed("produce", self.delivery.send)),
            (self.delivery, "send_all", timed("produce", self.delivery.send_all)),
            (self.delivery, "confirm", timed("produce", self.delivery.confirm)),
            (self.delivery, "commit", timed("commit", self.delivery.commit)),
        ]
        for store in self.stores.values():
            for name in ("get", "get_many", "write", "due_timers", "next_due"):
                plans.append((store, name, timed("store", getattr(store, name))))
        return plans

    def log(self) -> dict[tuple[str, int], list[Any]]:
        return LogProducer({BOOK: self.book}).log

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.delivery.close()


def _timed_pass(work: Callable[[], None], clock: Callable[[], float] = time.thread_time
                ) -> float:
    gc.collect()
    started = clock()
    work()
    return clock() - started


@contextmanager
def _collector_tuned() -> Iterator[None]:
    """The processor's garbage collection (``collector.tune``) for one pass, then the
    interpreter's own again (the echo's and the floor's passes run with it)."""
    threshold = gc.get_threshold()
    collector.tune()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def processor_pass(polls: Polls, partitions: int, exactly_once: bool,
                   stages: Stages | None = None) -> tuple[float, str]:
    """(seconds of this thread's time, digest of the outputs) of one pass."""
    with tempfile.TemporaryDirectory(prefix="cpu-harness-") as tmp, _collector_tuned():
        run = ProcessorRun(Path(tmp), partitions, exactly_once)
        try:
            plans = run.instrumented(stages) if stages else []

            def work() -> None:
                with _all(plans):
                    for records in polls:
                        run.batch(records)

            # Instrumented: the stages' clock (an exactly-once commit waits for a thread).
            seconds = _timed_pass(work, time.perf_counter if stages else time.thread_time)
            return seconds, log_digest(run.log())
        finally:
            run.close()


@contextmanager
def _all(plans: list[Any]) -> Iterator[None]:
    if not plans:
        yield
        return
    target, name, value = plans[0]
    with _patched(target, name, value), _all(plans[1:]):
        yield


def echo_pass(polls: Polls) -> float:
    """The Avro echo's work per record: decode, encode, produce; a flush per poll."""
    codec, producer = AvroCodec(), LogProducer({})

    def work() -> None:
        for records in polls:
            for msg in records:
                producer.produce("echo", value=codec.encode(codec.decode(msg.value())),
                                 key=msg.key())
            producer.flush()

    return _timed_pass(work)


def floor_pass(polls: Polls, partitions: int) -> float:
    """io-floor's work per record and per poll (``raw_echo._Floor``), its reports included."""
    with tempfile.TemporaryDirectory(prefix="cpu-floor-") as tmp:
        floor = _Floor("floor", Path(tmp), partitions)
        producer = LogProducer({"on_delivery": floor.report})

        def send(topic: str, **record: Any) -> None:
            producer.produce(topic, **record)

        def work() -> None:
            for records in polls:
                for msg in records:
                    floor.handle(msg, send)  # type: ignore[arg-type]
                floor.before_commit(send)
                producer.flush()
                floor.committed()

        try:
            return _timed_pass(work)
        finally:
            for store in floor._stores:
                store.close()


def measure(spec: WorkloadSpec, partitions: int, passes: int) -> dict[str, Any]:
    """µs per record of every arm (the fastest of ``passes``) and the processor's stages."""
    polls = polls_of(spec, partitions)
    records = sum(len(p) for p in polls)

    def us(seconds: float) -> float:
        return round(seconds / records * 1e6, 2)

    result: dict[str, Any] = {"records": records, "partitions": partitions, "passes": passes}
    arms: dict[str, Callable[[], tuple[float, str]]] = {
        "echo": lambda: (echo_pass(polls), ""),
        "floor": lambda: (floor_pass(polls, partitions), ""),
        "alo": lambda: processor_pass(polls, partitions, False),
        "eos": lambda: processor_pass(polls, partitions, True),
    }
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    digests: dict[str, set[str]] = {name: set() for name in arms}
    staged: dict[str, tuple[float, Stages]] = {}
    for _ in range(passes):  # interleaved: a disturbance spreads over every arm
        for name, arm in arms.items():
            spent, digest = arm()
            seconds[name].append(spent)
            digests[name].add(digest)
        for name, exactly_once in (("alo", False), ("eos", True)):
            stages = Stages()
            wall, _ = processor_pass(polls, partitions, exactly_once, stages)
            if name not in staged or wall < staged[name][0]:
                staged[name] = (wall, stages)
    result["echo_us"], result["floor_us"] = us(min(seconds["echo"])), us(min(seconds["floor"]))
    for name in ("alo", "eos"):
        if len(digests[name]) != 1:
            raise RuntimeError(f"the {name} outputs differ between passes: {digests[name]}")
        best = min(seconds[name])
        wall, stages = staged[name]
        # The least disturbed instrumented pass splits the figure: each stage its share.
        shares = {stage: s / wall for stage, s in stages.seconds.items()}
        shares["other"] = 1 - sum(shares.values())
        result[name] = {"us": us(best), "digest": digests[name].pop(),
                        "passes_us": [us(s) for s in seconds[name]],
                        "instrumented_us": us(wall),
                        "stages_us": {stage: us(best * share) for stage, share in shares.items()}}
    return result


def table(result: dict[str, Any]) -> str:
    """The figures as a Markdown table: µs per record, by stage and arm."""
    rows = ["| µs per record | at least once | exactly once |", "|---|---|---|"]
    for stage in (*STAGES, "other"):
        rows.append(f"| {stage} | {result['alo']['stages_us'][stage]:.2f} | "
                    f"{result['eos']['stages_us'][stage]:.2f} |")
    rows.append(f"| **processor, per decision** | **{result['alo']['us']:.2f}** | "
                f"**{result['eos']['us']:.2f}** |")
    rows.append(f"| avro echo, per record | {result['echo_us']:.2f} | |")
    rows.append(f"| io-floor, per record | {result['floor_us']:.2f} | |")
    rows.append(f"| processor / echo | {result['alo']['us'] / result['echo_us']:.2f} | "
                f"{result['eos']['us'] / result['echo_us']:.2f} |")
    return "\n".join(rows) + (f"\n\n{result['records']} records, {result['partitions']} "
                              f"partitions, fastest of {result['passes']} passes; outputs "
                              f"sha256 alo {result['alo']['digest'][:16]}, "
                              f"eos {result['eos']['digest'][:16]}")


def harness_parser(doc: str) -> argparse.ArgumentParser:
    """The flags every tool of the harness takes (``doc``: its module docstring)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--intents", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here too")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = harness_parser(__doc__)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    result = measure(WorkloadSpec(args.intents, seed=args.seed), args.partitions, args.passes)
    return emit(table(result), result, args.out)


def emit(text: str, result: dict[str, Any], out: Path | None) -> int:
    """Print a tool's table; write its figures as JSON to ``out`` too, when given."""
    print(text)
    if out:
        out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
