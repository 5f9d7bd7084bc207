"""The fault schedule, from the seed alone: which kind of fault at which second.

Every kind named gets its share (the kinds are dealt round-robin in a seeded order, so a
short soak with 20 faults and seven kinds still has every kind at least twice); the times
are spread evenly over the soak after a warm-up, with seeded jitter. Which process, broker or
mode a fault hits is drawn when it fires (what runs then depends on earlier faults).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FAULT_KINDS = ("processor-kill", "connector-kill", "agent-kill", "target-kill", "broker-kill",
               "pause", "target-fault")


class PlanError(ValueError):
    """The options cannot make a schedule (unknown kind, no time for the faults)."""


@dataclass(frozen=True)
class PlannedFault:
    at_s: float  # seconds after the load started
    kind: str


def plan_faults(seed: int, duration_s: float, count: int, kinds: tuple[str, ...],
                warmup_s: float = 5.0) -> list[PlannedFault]:
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        raise PlanError(f"unknown fault kind(s) {', '.join(unknown)}; "
                        f"choose from {', '.join(FAULT_KINDS)}")
    if count == 0 or not kinds:
        return []
    if duration_s <= warmup_s:
        raise PlanError(f"a soak of {duration_s:g} s leaves no time for faults after the "
                        f"{warmup_s:g} s warm-up")
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    step = (duration_s - warmup_s) / count
    return [PlannedFault(round(warmup_s + step * (i + rng.random() * 0.8), 3),
                         order[i % len(order)]) for i in range(count)]
