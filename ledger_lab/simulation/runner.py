"""Many seeded runs: the configuration each seed gets, running them (on every core), and a
failing run reported with its seed and a shortened, replayable trace."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from ledger_lab.simulation.invariants import violations
from ledger_lab.simulation.world import FAULTS, FENCE_FAULTS, SimConfig, World

TARGETS = ((True, True, False), (True, True, True), (True, False, False), (True, False, True),
           (False, True, False), (False, False, False))  # (deduplicates, queryable, fast path)


def config_for(seed: int) -> SimConfig:
    """The target variant and the few fault kinds this seed's run injects (a few kinds at a
    time reach deep combinations more often than all kinds at once, as the model's fault
    subsets do)."""
    rng = random.Random(seed * 7919 + 17)
    dedup, queryable, fast = TARGETS[seed % len(TARGETS)]
    kinds = tuple(rng.sample(FAULTS, k=rng.choice((1, 2, 3, 4))))
    return SimConfig(deduplicates=dedup, queryable=queryable, fast_path=fast, faults=kinds,
                     fault_budget=rng.choice((1, 1, 2)), keys=rng.choice((1, 1, 2)))


def pregrant_config_for(seed: int) -> SimConfig:
    """A pre-grant run: ``config_for``'s target and size, an exactly-once processor
    pre-granting, and the fence's own faults among those drawn."""
    rng = random.Random(seed * 104_729 + 3)
    kinds = [*FAULTS, *FENCE_FAULTS]
    base = config_for(seed)
    return replace(base, pregrant=True, faults=tuple(rng.sample(kinds, k=len(base.faults))))


@dataclass(frozen=True)
class Failure:
    seed: int
    config: SimConfig
    problems: tuple[str, ...]
    trace: tuple[str, ...]


def run_one(seed: int, choices: list[int] | None = None) -> World:
    return World(seed, config_for(seed), choices).run()


def check(seed: int) -> Failure | None:
    world = run_one(seed)
    problems = violations(world)
    if not problems:
        return None
    return Failure(seed, world.cfg, tuple(problems), tuple(shortest_trace(seed, world)))


def _check_range(bounds: tuple[int, int]) -> list[Failure]:
    logging.disable(logging.WARNING)  # the core's warnings are expected under faults
    return [f for seed in range(*bounds) if (f := check(seed)) is not None]


def run_many(first: int, count: int, workers: int = 1,
             progress: Callable[[int], None] | None = None) -> Iterator[Failure]:
    """Failures among seeds first .. first+count-1, in chunks over ``workers`` processes;
    ``progress(seeds done)`` after each chunk."""
    chunk = max(1, min(2_000, count // max(1, workers * 4)))
    bounds = [(s, min(s + chunk, first + count)) for s in range(first, first + count, chunk)]
    done = 0
    if workers <= 1:
        results: Iterable[list[Failure]] = map(_check_range, bounds)
        for (lo, hi), failures in zip(bounds, results, strict=True):
            done += hi - lo
            if progress:
                progress(done)
            yield from failures
        return
    with ProcessPoolExecutor(workers) as pool:
        for (lo, hi), failures in zip(bounds, pool.map(_check_range, bounds), strict=True):
            done += hi - lo
            if progress:
                progress(done)
            yield from failures


def shortest_trace(seed: int, failing: World) -> list[str]:
    """The failing run's trace, shortened: drop the longest suffix and each fault step whose
    removal keeps some violation (replays are exact: a run is its list of choices)."""
    choices = list(failing.drawn)
    for cut in _cuts(len(choices)):
        trial = choices[:cut]
        if violations(World(seed, failing.cfg, trial).run()):
            choices = trial
            break
    return World(seed, failing.cfg, choices).run().trace


def _cuts(n: int) -> Iterable[int]:
    step = max(1, n // 16)
    return range(step, n, step)
