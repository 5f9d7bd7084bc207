"""What a local cluster reports about itself: which nodes run, under which PIDs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NodeStatus:
    node_id: int
    pid: int | None  # the PID recorded for the node; None once stopped
    alive: bool  # that PID runs and is this node's broker
    broker_port: int
    controller_port: int
    dir: Path


@dataclass(frozen=True)
class ClusterStatus:
    """What runs in a cluster folder. ``bootstrap`` is None when no cluster was ever made."""

    cluster_dir: Path
    bootstrap: str | None
    nodes: tuple[NodeStatus, ...]

    @property
    def running(self) -> bool:
        """True when at least one node process runs."""
        return any(n.alive for n in self.nodes)

    @property
    def alive_count(self) -> int:
        return sum(n.alive for n in self.nodes)


@dataclass(frozen=True)
class StopResult:
    stopped: tuple[int, ...]  # PIDs that were running
    killed: tuple[int, ...]  # of those, the PIDs that ignored SIGTERM and got SIGKILL
