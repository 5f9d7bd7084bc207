"""The differential check of the compiled decision core: per-seed digests of what the
simulation's processor (the real ``decide``) produced, for comparing two processes, one
running the compiled core and one the pure reference (``LEDGER_CORE``).

A seed's digest is SHA-256 over the Avro bytes of every output the processor produced (the
dispatch topic's events, the receipts, the alerts, in order), the row bytes of every key's
final state and the run's trace: two cores that differ in one output byte, one state
field or one scheduling step differ here.

    LEDGER_CORE=pure python -m ledger_lab.simulation.differential --count 100000 --out p.txt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import ledger_stream
from ledger_lab.simulation.runner import run_one
from ledger_stream.core import running
from ledger_stream.serde import AvroCodec
from ledger_stream.state import encode_row

_CODEC = AvroCodec()


def seed_digest(seed: int) -> str:
    """The digest of seed ``seed``'s run (see the module text)."""
    world = run_one(seed)
    processor = world.processor
    hasher = hashlib.sha256()
    for event in (*(logged.event for logged in processor.dispatch), *processor.receipts,
                  *processor.alerts):
        hasher.update(_CODEC.encode(event))
    for key in sorted(processor.states):
        hasher.update(key.encode() + b"\0" + encode_row(processor.states[key]))
    hasher.update("\n".join(world.trace).encode())
    return hasher.hexdigest()


def _range(bounds: tuple[int, int]) -> list[str]:
    logging.disable(logging.WARNING)  # the core's warnings are expected under faults
    return [seed_digest(seed) for seed in range(*bounds)]


def digests(first: int, count: int, workers: int = 1) -> Iterator[list[str]]:
    """Seeds ``first`` .. ``first + count - 1``'s digests, in seed order, a chunk at a time
    (a long run's progress can be kept as it goes)."""
    chunk = max(1, min(1_000, count // max(1, workers * 4)))
    bounds = [(s, min(s + chunk, first + count)) for s in range(first, first + count, chunk)]
    if workers <= 1:
        yield from map(_range, bounds)
        return
    with ProcessPoolExecutor(workers) as pool:
        yield from pool.map(_range, bounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=1_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", help="write the per-seed digests here, one a line")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    found: list[str] = []
    out = open(args.out, "w", encoding="utf-8") if args.out else None  # noqa: SIM115
    try:
        for part in digests(args.first, args.count, args.workers):
            found += part
            if out:
                out.write("".join(f"{d}\n" for d in part))
                out.flush()
    finally:
        if out:
            out.close()
    print(json.dumps({
        "core": ledger_stream.CORE, "running": running(), "pid": os.getpid(),
        "first": args.first, "count": args.count,
        "seconds": round(time.perf_counter() - started, 1),
        "digest": hashlib.sha256("".join(found).encode()).hexdigest()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
