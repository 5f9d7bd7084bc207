"""The benchmark's options: one frozen object, from flags with ``LEDGER_BENCH_*`` fallbacks.

Lives beside the benchmark rather than in :mod:`ledger_stream.config` because no other
command reads it; it reads the environment the same way (pydantic-settings, one prefix).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ledger_lab.bench.arm_names import ARM_NAMES
from ledger_lab.bench.arms.peers_plan import PeersPlan
from ledger_lab.bench.context import Sizes

Mode = Literal["at-least-once", "exactly-once", "both"]


class BenchOptions(BaseSettings):
    """What to run and how big. ``smoke`` replaces every size with a seconds-long one."""

    model_config = SettingsConfigDict(env_prefix="LEDGER_BENCH_", frozen=True, extra="ignore")

    intents: int = Field(200_000, ge=10, description="intents in the shared workload")
    keys: int | None = Field(None, ge=1, description="distinct operation keys")
    duplicate_share: float = Field(0.10, ge=0, lt=1, description="share of duplicates")
    conflict_share: float = Field(0.02, ge=0, lt=1, description="share of conflicts")
    partitions: int = Field(12, ge=1, description="partitions of every benchmark topic")
    mode: Mode = "both"
    arms: str = ",".join(ARM_NAMES)
    repeat: int = Field(3, ge=1, description="repetitions of the interleaved arms")
    seed: int = 1
    latency_rate: float | None = Field(None, gt=0, description="the latency arm's rate")
    out: str | None = None
    smoke: bool = False

    def sized(self) -> tuple[BenchOptions, Sizes]:
        """The effective options and arm sizes (tiny ones for a smoke run)."""
        if not self.smoke:
            return self, Sizes(latency_rate=self.latency_rate)
        small = self.model_copy(update={"intents": min(self.intents, 2_000), "keys": None,
                                        "partitions": min(self.partitions, 3), "repeat": 1})
        return small, Sizes(pg_naive_intents=500, latency_seconds=1.0,
                            growth_keys=(1_000, 4_000), growth_batch=2_000, sdk_calls=10,
                            sdk_agents=8, status_sizes=(1_000,), dispatches=100,
                            # tests/bench/test_peers.py runs every peer library
                            peers=PeersPlan(levels=(2,), calls_per_agent=1, min_calls=3,
                                            repeats=1, peers=("effect-ledger", "idemkit"),
                                            warm_up_effects=20))

    def arm_names(self) -> tuple[str, ...]:
        """The selected arms in canonical order; ValueError names an unknown one."""
        wanted = {name.strip() for name in self.arms.split(",") if name.strip()}
        unknown = wanted - set(ARM_NAMES)
        if unknown or not wanted:
            raise ValueError(f"unknown arm(s) {', '.join(sorted(unknown)) or '(none)'}; "
                             f"choose from {', '.join(ARM_NAMES)}")
        return tuple(name for name in ARM_NAMES if name in wanted)

    def guarantees(self) -> tuple[str, ...]:
        if self.mode == "both":
            return ("at-least-once", "exactly-once")
        return (self.mode,)
