"""``cluster.json``: what a local cluster is (id, nodes, ports, folders) and which PIDs run it.

Written atomically (temp file + rename) so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger_lab.local_kafka.server_properties import NodeSpec

STATE_FILE = "cluster.json"


@dataclass(frozen=True)
class ClusterState:
    """The recorded facts of one local cluster. ``pids`` maps node id to the PID that was
    started for it (absent once stopped)."""

    cluster_id: str
    kafka_version: str
    libs: Path
    nodes: tuple[NodeSpec, ...]
    pids: dict[int, int]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{node.broker_port}" for node in self.nodes)

    def node(self, node_id: int) -> NodeSpec:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id} in this cluster (nodes: {self.node_ids})")

    @property
    def node_ids(self) -> list[int]:
        return [node.node_id for node in self.nodes]

    def with_pids(self, pids: dict[int, int]) -> ClusterState:
        return ClusterState(self.cluster_id, self.kafka_version, self.libs, self.nodes, pids)


def read_state(cluster_dir: Path) -> ClusterState | None:
    """The state recorded in ``cluster_dir``, or None when there is none."""
    try:
        raw = json.loads((cluster_dir / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    return _from_json(raw)


def write_state(cluster_dir: Path, state: ClusterState) -> None:
    cluster_dir.mkdir(parents=True, exist_ok=True)
    target = cluster_dir / STATE_FILE
    temporary = target.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(_to_json(state), indent=2) + "\n")
    os.replace(temporary, target)


def _to_json(state: ClusterState) -> dict[str, Any]:
    return {
        "cluster_id": state.cluster_id,
        "kafka_version": state.kafka_version,
        "bootstrap": state.bootstrap,
        "libs": str(state.libs),
        "nodes": [
            {
                "node_id": node.node_id,
                "broker_port": node.broker_port,
                "controller_port": node.controller_port,
                "dir": str(node.dir),
                "pid": state.pids.get(node.node_id),
            }
            for node in state.nodes
        ],
    }


def _from_json(raw: dict[str, Any]) -> ClusterState:
    nodes = tuple(
        NodeSpec(
            node_id=int(entry["node_id"]),
            broker_port=int(entry["broker_port"]),
            controller_port=int(entry["controller_port"]),
            dir=Path(entry["dir"]),
        )
        for entry in raw["nodes"]
    )
    pids = {int(e["node_id"]): int(e["pid"]) for e in raw["nodes"] if e.get("pid") is not None}
    return ClusterState(
        cluster_id=str(raw["cluster_id"]),
        kafka_version=str(raw["kafka_version"]),
        libs=Path(raw["libs"]),
        nodes=nodes,
        pids=pids,
    )
