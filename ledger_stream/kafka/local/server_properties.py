"""The ``server.properties`` of each local node: KRaft, combined broker+controller roles,
PLAINTEXT on loopback, and internal topics sized to the cluster so transactions work."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger_stream.kafka.local.ports import HOST

INTERNAL_PARTITIONS = 3


@dataclass(frozen=True)
class NodeSpec:
    """One node of a local cluster: its id, its two ports and its folder."""

    node_id: int
    broker_port: int
    controller_port: int
    dir: Path

    @property
    def properties_path(self) -> Path:
        return self.dir / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"


def plan_nodes(cluster_dir: Path, ports: list[int]) -> tuple[NodeSpec, ...]:
    """Nodes 1..n from ``2n`` ports: node i gets ports[2i-2] (broker) and ports[2i-1]."""
    return tuple(
        NodeSpec(
            node_id=i + 1,
            broker_port=ports[2 * i],
            controller_port=ports[2 * i + 1],
            dir=cluster_dir / f"node-{i + 1}",
        )
        for i in range(len(ports) // 2)
    )


def render(node: NodeSpec, cluster: tuple[NodeSpec, ...]) -> str:
    """``server.properties`` text for ``node`` in ``cluster``.

    One node: every internal topic has replication factor 1 and min ISR 1 (the defaults of 3
    make transactions hang). Three nodes: replication 3, min ISR 2.
    """
    replication = min(len(cluster), 3)
    min_isr = 2 if replication >= 3 else 1
    voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in cluster)
    settings = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://{HOST}:{node.broker_port},"
        f"CONTROLLER://{HOST}:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{node.broker_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": node.data_dir,
        "num.partitions": 1,
        "default.replication.factor": replication,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": INTERNAL_PARTITIONS,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": INTERNAL_PARTITIONS,
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min_isr,
        "share.coordinator.state.topic.num.partitions": INTERNAL_PARTITIONS,
        "group.initial.rebalance.delay.ms": 0,
        # A node killed with SIGKILL can register again only once its old registration
        # expired: 4 s instead of the default 9 s keeps crash-and-restart tests fast.
        "broker.session.timeout.ms": 4000,
        "broker.heartbeat.interval.ms": 1000,
        # Consumer-protocol (KIP-848) groups may ask for the processor's default session
        # timeout (10 s, at least 6 s) and a heartbeat of 1 s (broker defaults: 45 s, 5 s).
        "group.consumer.min.session.timeout.ms": 6000,
        "group.consumer.min.heartbeat.interval.ms": 1000,
        # Kafka 4's group coordinator holds each offset commit up to 5 ms to write it with
        # others; an at-least-once processor waits for its commit every batch (sync commit
        # p50 6.5 ms -> 1.2 ms, latency p50 48 -> 35 ms; docs/benchmarks.md).
        "group.coordinator.append.linger.ms": 0,
        "auto.create.topics.enable": "false",
        "num.network.threads": 2,
        "num.io.threads": 4,
    }
    lines = [f"# Written by ledger-stream for node {node.node_id}; rewritten on every start."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"
