"""What a soak runs: its length, load, seed, faults and the size of its world."""

from __future__ import annotations

from dataclasses import dataclass

from ledger_lab.chaos.plan import FAULT_KINDS


@dataclass(frozen=True)
class ChaosOptions:
    duration_s: float = 600.0
    rate: float = 20.0  # intents per second, across all agents
    seed: int = 0
    faults: int = 120  # how many faults the scheduler injects
    kinds: tuple[str, ...] = FAULT_KINDS
    nodes: int = 3
    partitions: int = 6
    processors: int = 2
    connectors: int = 2  # per target
    agents: int = 2
    target_latency_ms: int = 20
    guarantee: str = "exactly-once"
    settle_s: float = 180.0  # after the load: how long every key may take to settle
    pause_s: float = 8.0  # SIGSTOP length: past the session timeout (6 s) and the lease (4 s)
    down_s: tuple[float, float] = (1.0, 4.0)  # how long a killed member stays down
    grow_by: int = 0  # growth phase: `repartition --to partitions + grow_by` (0: none)
    grow_at: float = 1 / 3  # of the duration
    upgrade: bool = False  # rolling upgrade phase: every processor and connector replaced
    upgrade_at: float = 2 / 3
