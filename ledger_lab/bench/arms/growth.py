"""Growth: cost per decision as the number of live keys grows (10 thousand to 1 million).

For each size N, a fresh RocksDB partition store (the processor's own class,
:class:`~ledger_stream.state.RocksDBPartitionStore`) is pre-loaded with N reserved keys and
their timer index entries, then a fixed batch of intents is read and decided through
:class:`LedgerStep` against the processor's batch overlay
(:class:`~ledger_stream.processor.partition.PartitionOverlay`), written to the store every
``CHECKPOINT`` decisions as the checkpoint's step d does (rows encoded once, as for the
changelog). The batch has the workload's shares: fresh intents on new keys, duplicates and
conflicts on random live keys.

This is the ``decide`` + RocksDB path without Kafka: a full Kafka run over a million keys
takes minutes on two cores, and Kafka's cost does not depend on the key count. The processor
spreads keys over one store per partition; here one store holds all N, the harder case.

Runs as ``python -m ledger_lab.bench.arms.growth`` (the arm does), printing JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.workload import BASE_AT_MS, intent_for, refund_args
from ledger_stream.domain.deadlines import due_ms
from ledger_stream.domain.decide import decide
from ledger_stream.domain.events import Containment, Intent, Origin, Tick
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, absent
from ledger_stream.processor.partition import PartitionOverlay
from ledger_stream.processor.step import Forward, LedgerStep
from ledger_stream.serde import AvroCodec
from ledger_stream.state import RocksDBPartitionStore, StoreBatch, encode_row

CHECKPOINT = 5_000
PRELOAD_CHUNK = 50_000
TOPIC = "growth.intents"
KEY_SPACE = "growth"


def _intent(index: int, change: int = 0, serial: int = 0,
            origin: Origin = Origin.FRESH) -> Intent:
    return intent_for(KEY_SPACE, index, refund_args(index, change), f"{serial:016x}{index:016x}",
                      BASE_AT_MS + index, origin)


class StateFactory:
    """Reserved-key states without deciding each one: the state of key 0 from ``decide``,
    with the fields that come from the intent substituted. Checked against ``decide``."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        model = _intent(0)
        self._template = decide(absent(model.key), model, policy, model.at_ms).state

    def state(self, intent: Intent) -> KeyState:
        return replace(
            self._template, key=intent.key, intent_event_id=intent.event_id,
            tenant=intent.tenant, args_json=intent.args_json, args_hash=intent.args_hash,
            not_before_ms=intent.at_ms, reserved_at_ms=intent.at_ms,
            phase_since_ms=intent.at_ms,
        )

    def check(self, count: int = 200) -> None:
        for index in range(count):
            intent = _intent(index)
            real = decide(absent(intent.key), intent, self._policy, intent.at_ms).state
            if self.state(intent) != real:
                raise BenchError("growth: the pre-loaded state differs from decide()'s")


def preload(store: RocksDBPartitionStore, keys: int, factory: StateFactory,
            policy: Policy) -> None:
    """N reserved keys, with their rows and timer index entries, as restore writes them."""
    for start in range(0, keys, PRELOAD_CHUNK):
        rows, timers = {}, []
        for index in range(start, min(keys, start + PRELOAD_CHUNK)):
            state = factory.state(_intent(index))
            rows[state.key] = encode_row(state)
            due = due_ms(state, policy)
            if due is not None:
                timers.append((due, state.key))
        store.write(StoreBatch(rows, (), timers))


def batch_for(keys: int, size: int, duplicate_share: float, conflict_share: float,
              seed: int, codec: AvroCodec) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    records = []
    fresh = keys
    for serial in range(1, size + 1):
        roll = rng.random()
        if roll < duplicate_share:
            intent = _intent(rng.randrange(keys), 0, serial, Origin.REPLAY)
        elif roll < duplicate_share + conflict_share:
            intent = _intent(rng.randrange(keys), 1, serial, Origin.FORK)
        else:
            intent, fresh = _intent(fresh, 0, serial), fresh + 1
        records.append((intent.key.encode(), codec.encode(intent)))
    return records


def measure(keys: int, batch: int, duplicate_share: float, conflict_share: float,
            folder: Path) -> dict[str, float]:
    policy, codec = Policy(), AvroCodec()
    factory = StateFactory(policy)
    factory.check()
    store = RocksDBPartitionStore(folder / f"keys-{keys}", 0)
    try:
        started = time.perf_counter()
        preload(store, keys, factory, policy)
        preload_s = time.perf_counter() - started
        records = batch_for(keys, batch, duplicate_share, conflict_share, keys, codec)
        step = LedgerStep(policy, codec, {TOPIC: "intents"}, partitions=1)
        read, decide_one, timer = step.read, step.decide, step.timer
        started = time.perf_counter()
        overlay = PartitionOverlay(store, policy)
        for offset, (key, value) in enumerate(records, 1):
            overlay.advance(BASE_AT_MS + offset)
            now = overlay.clock
            for due, timer_key in overlay.due_now():
                timer(overlay, timer_key, due, now)
            event = read(value, key, TOPIC, 0, offset, now)
            if not isinstance(event, Tick | Containment | Forward):
                decide_one(overlay, event, now)
            if offset % CHECKPOINT == 0:
                store.write(overlay.store_batch(offset))
                overlay = PartitionOverlay(store, policy)
        store.write(overlay.store_batch(len(records)))
        seconds = time.perf_counter() - started
    finally:
        store.close()
    size = sum(f.stat().st_size for f in (folder / f"keys-{keys}").rglob("*") if f.is_file())
    return {"us_per_decision": seconds / batch * 1e6, "preload_s": preload_s,
            "store_mb": size / 2**20}


class GrowthArm:
    name = "growth"
    repeated = False

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        sizes, spec = ctx.sizes, ctx.workload.spec
        figures: dict[str, float] = {}
        peak = 0.0
        for done, keys in enumerate(sizes.growth_keys):
            ctx.progress(self.name, done, len(sizes.growth_keys))
            argv = [sys.executable, "-m", "ledger_lab.bench.arms.growth", "--keys",
                    str(keys), "--batch", str(sizes.growth_batch), "--duplicate-share",
                    str(spec.duplicate_share), "--conflict-share", str(spec.conflict_share),
                    "--dir", str(ctx.folder("growth"))]
            done_run = subprocess.run(argv, capture_output=True, text=True, timeout=1800,
                                      check=False)
            if done_run.returncode != 0:
                raise BenchError(f"growth at {keys} keys failed:\n{done_run.stderr[-3000:]}")
            result = json.loads(done_run.stdout.strip().splitlines()[-1])
            figures[f"us_per_decision_{keys}"] = result["us_per_decision"]
            figures[f"preload_s_{keys}"] = result["preload_s"]
            figures[f"store_mb_{keys}"] = result["store_mb"]
            peak = max(peak, result["peak_rss_mb"])
        ctx.progress(self.name, len(sizes.growth_keys), len(sizes.growth_keys))
        return ArmResult(self.name, repetition, figures, peak,
                         {"path": "LedgerStep.read/decide + PartitionOverlay + "
                          "RocksDBPartitionStore (the processor's step a and d), no Kafka",
                          "batch": sizes.growth_batch, "checkpoint": CHECKPOINT,
                          "keys": list(sizes.growth_keys)})


def main() -> None:
    parser = argparse.ArgumentParser(description="growth arm: one key count")
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--duplicate-share", type=float, required=True)
    parser.add_argument("--conflict-share", type=float, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    a = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="growth-", dir=a.dir))
    try:
        result = measure(a.keys, a.batch, a.duplicate_share, a.conflict_share, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


if __name__ == "__main__":
    main()
