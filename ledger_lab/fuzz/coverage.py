"""Coverage-guided fuzzing (atheris, libFuzzer's engine) of the same input path and the same
promises as seeded.py: the seeded generator there reaches the shapes we thought of; this one
follows the code's own branches from a corpus of valid records of every input type.

One input is one record: byte 0 picks the topic (bit 0), a null key (bit 1) and, in its other
bits, a partition other than the key's home one (1 in 8); byte 1 is the key's length; then
the key and the value. Records go through ``fuzz.judge`` into one long-lived batch over
in-memory stores (fresh ones every ``RESET_EVERY_INPUTS``), so the state carries from input
to input as on a partition. A broken promise raises ``PromiseBroken``: libFuzzer stops, prints
it and writes the input as ``crash-<sha1>`` (replay it by passing that file).

Run: ``ledger-stream fuzz --engine atheris --cases N`` (or ``python -m
ledger_lab.fuzz.coverage -runs=N CORPUS_DIR``). atheris is a dev dependency
(x86-64 Linux wheels).
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import replace
from pathlib import Path

from ledger_lab.fuzz import seeded as fuzz
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.changelog import Positions
from ledger_stream.processor.step import LedgerStep
from ledger_stream.serde import AvroCodec
from ledger_stream.state import MemoryPartitionStore

RESET_EVERY_INPUTS = 50_000
SEEDS = 400  # corpus records written when the corpus folder is empty


class PromiseBroken(AssertionError):
    """A record broke one of the promises seeded.py checks."""


def frame(topic: str, key: bytes | None, value: bytes, other_partition: bool = False) -> bytes:
    """An input in this engine's layout (the corpus is written with it)."""
    flags = (topic == fuzz.ATTEMPTS) | (key is None) << 1 | (0b11100 if other_partition else 0)
    key = key or b""
    return bytes([flags, min(len(key), 255)]) + key[:255] + value


class Harness:
    def __init__(self, step: LedgerStep | None = None) -> None:
        self.codec = AvroCodec()
        self.step = step or LedgerStep(fuzz.POLICY, self.codec, {
            fuzz.INTENTS: "intents", fuzz.ATTEMPTS: "attempts"}, fuzz.PARTITIONS)
        self.report = fuzz.FuzzReport()
        self.inputs = 0
        self._fresh()

    def _fresh(self) -> None:
        self.stores = {p: MemoryPartitionStore(p) for p in range(fuzz.PARTITIONS)}
        self._new_batch()

    def _new_batch(self) -> None:
        self.batch = Batch(self.step, self.stores,  # type: ignore[arg-type]
                           {p: Positions() for p in range(fuzz.PARTITIONS)},
                           (fuzz.INTENTS, fuzz.ATTEMPTS))

    def one(self, data: bytes) -> None:
        if len(data) < 2:
            return
        flags, length = data[0], data[1]
        key: bytes | None = None if flags & 0b10 else data[2:2 + length]
        value = data[2 + length:] or None
        topic = fuzz.ATTEMPTS if flags & 1 else fuzz.INTENTS
        home = partition_for(key, fuzz.PARTITIONS) if key else 0
        partition = (flags >> 2) % fuzz.PARTITIONS if (flags >> 2) & 0b111 == 0b111 else home
        self.inputs += 1
        why = fuzz.judge(self.step, self.batch, self.codec, topic, key, value, partition,
                         self.inputs, (flags >> 5) * 250, self.report)
        if why:
            raise PromiseBroken(why)
        if self.inputs % fuzz.CHUNK == 0:  # step d, as the checkpoint does
            for p, overlay in self.batch.overlays.items():
                self.stores[p].write(overlay.store_batch(None))
            self._new_batch()
        if self.inputs % RESET_EVERY_INPUTS == 0:
            self._fresh()


def write_corpus(folder: Path, count: int = SEEDS, seed: int = 1) -> None:
    """Valid records of every input type (and some mutated ones) as the corpus's seeds."""
    folder.mkdir(parents=True, exist_ok=True)
    gen = fuzz.Generator(random.Random(seed), AvroCodec())
    for i in range(count):
        topic, key, value, _ = gen.record()
        if value is not None:
            (folder / f"seed-{i:04d}").write_bytes(frame(topic, key, value))


def planted_step() -> LedgerStep | None:
    """``LEDGER_FUZZ_PLANT=lax-approval`` (tests only): a step whose policy forgot that
    payouts need an approval, which the engine must catch."""
    if os.environ.get("LEDGER_FUZZ_PLANT") != "lax-approval":
        return None
    lax = replace(fuzz.POLICY, approval_required_actions=frozenset())
    return LedgerStep(lax, AvroCodec(), {fuzz.INTENTS: "intents", fuzz.ATTEMPTS: "attempts"},
                      fuzz.PARTITIONS)


def main(argv: list[str]) -> None:
    import atheris

    corpus = next((Path(a) for a in argv[1:] if not a.startswith("-")), None)
    if corpus is not None and (not corpus.exists() or not any(corpus.iterdir())):
        write_corpus(corpus)
    harness = Harness(planted_step())
    atheris.instrument_all()
    atheris.Setup(argv, harness.one)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
