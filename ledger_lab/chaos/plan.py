"""The fault schedule, from the seed alone: which kind of fault at which second.

Every kind named gets its share (the kinds are dealt round-robin in a seeded order, so a
short soak with 20 faults and seven kinds still has every kind at least twice); the times
are spread evenly over the soak after a warm-up, with seeded jitter. Which process, broker or
mode a fault hits is drawn when it fires (what runs then depends on earlier faults).

The operator phases (``plan_phases``) are placed by fraction of the soak, not drawn: a
partition growth (``ledger-stream repartition``) and a rolling upgrade, each at most once,
in the order of their fractions. Faults do not fire while a phase runs (the scheduler waits
for it), and the phase's time does not count against the soak's duration.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FAULT_KINDS = ("processor-kill", "connector-kill", "agent-kill", "target-kill", "broker-kill",
               "pause", "target-fault")


PHASE_KINDS = ("growth", "upgrade")


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


@dataclass(frozen=True)
class PlannedPhase:
    at_s: float  # seconds of ordinary load (phases excluded) before it starts
    kind: str  # growth | upgrade


def plan_phases(duration_s: float, grow_by: int, grow_at: float, upgrade: bool,
                upgrade_at: float, warmup_s: float = 5.0) -> list[PlannedPhase]:
    """The phases asked for, in time order: growth at ``grow_at`` of the duration when
    ``grow_by`` > 0, the upgrade at ``upgrade_at`` when ``upgrade``. PlanError when a
    fraction is outside (0, 1), a phase would start in the warm-up, or both at one second."""
    if grow_by < 0:
        raise PlanError(f"growth by {grow_by} partitions: only growing is supported")
    asked = [(kind, at) for kind, at, on in (("growth", grow_at, grow_by > 0),
                                             ("upgrade", upgrade_at, upgrade)) if on]
    phases = []
    for kind, fraction in asked:
        if not 0 < fraction < 1:
            raise PlanError(f"the {kind} phase at {fraction:g} of the soak: choose a "
                            "fraction between 0 and 1")
        at_s = round(duration_s * fraction, 3)
        if at_s < warmup_s:
            raise PlanError(f"the {kind} phase at {at_s:g} s falls in the {warmup_s:g} s "
                            "warm-up: choose a later fraction or a longer soak")
        phases.append(PlannedPhase(at_s, kind))
    if len({p.at_s for p in phases}) < len(phases):
        raise PlanError("the growth and upgrade phases cannot start at the same second")
    return sorted(phases, key=lambda p: p.at_s)
