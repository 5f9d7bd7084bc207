"""What the peers arm runs: the concurrencies, the calls at each, the repetitions and the
contestants. Lives apart from the arm so the bench's sizes can name it without importing
the arm."""

from __future__ import annotations

from dataclasses import dataclass

from ledger_lab.bench.arms.peers_libs import PEER_NAMES

LEDGER = "ledger-stream"


@dataclass(frozen=True, slots=True)
class PeersPlan:
    levels: tuple[int, ...] = (1, 8, 64)  # concurrent agents
    calls_per_agent: int = 4
    min_calls: int = 40  # fresh calls (and as many duplicates) at least, at every level
    repeats: int = 3  # interleaved repetitions; figures are their medians
    call_ms: int = 20  # the sandbox's time per payment
    peers: tuple[str, ...] = PEER_NAMES
    ledger: bool = True  # ledger-stream too (needs Kafka)
    # Fresh payments through ledger-stream at 64 agents before anything is measured, not
    # counted: a new broker's JVM compiles its hot paths over its first few thousand
    # effects (1.7-3 ms of its CPU per effect until then), which a running broker has done.
    warm_up_effects: int = 6000

    def calls(self, agents: int) -> int:
        return max(self.min_calls, agents * self.calls_per_agent)

    def contestants(self) -> tuple[str, ...]:
        return ((LEDGER,) if self.ledger else ()) + self.peers
