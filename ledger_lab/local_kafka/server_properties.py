"""The ``server.properties`` of each local node: KRaft, combined broker+controller roles,
PLAINTEXT on loopback, and internal topics sized to the cluster so transactions work.

With :class:`LocalSasl` (tests of the ledger's ACLs) every listener, the controllers'
included, takes SASL/PLAIN over loopback from a fixed set of users, and KRaft's
``StandardAuthorizer`` allows only what an ACL grants (the admin is the one super user)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_lab.local_kafka.ports import HOST

INTERNAL_PARTITIONS = 3
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SASL_LISTENER = "SASL_PLAINTEXT"


@dataclass(frozen=True)
class LocalSasl:
    """SASL/PLAIN users of a local cluster that enforces ACLs. ``admin`` is the brokers' own
    user and the only super user; ``users`` (name -> password) are principals ``User:NAME``
    that can do only what an ACL grants them."""

    admin_password: str
    users: Mapping[str, str] = field(default_factory=dict)
    admin: str = "admin"

    def client(self, user: str | None = None) -> dict[str, str]:
        """librdkafka properties that connect as ``user`` (the admin when None)."""
        name = user or self.admin
        password = self.admin_password if user is None else self.users[user]
        return {"security.protocol": SASL_LISTENER, "sasl.mechanism": "PLAIN",
                "sasl.username": name, "sasl.password": password}

    def properties(self) -> dict[str, Any]:
        """What a node's ``server.properties`` adds or replaces to enforce this."""
        accounts = {self.admin: self.admin_password, **self.users}
        logins = " ".join(f'user_{name}="{password}"' for name, password in accounts.items())
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{self.admin}" password="{self.admin_password}" {logins};')
        return {
            "inter.broker.listener.name": SASL_LISTENER,
            "listener.security.protocol.map":
                f"{SASL_LISTENER}:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            f"listener.name.{SASL_LISTENER.lower()}.plain.sasl.jaas.config": jaas,
            "listener.name.controller.plain.sasl.jaas.config": jaas,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": f"User:{self.admin}",
            "allow.everyone.if.no.acl.found": "false",
        }


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


def render(node: NodeSpec, cluster: tuple[NodeSpec, ...], sasl: LocalSasl | None = None) -> str:
    """``server.properties`` text for ``node`` in ``cluster``.

    One node: every internal topic has replication factor 1 and min ISR 1 (the defaults of 3
    make transactions hang). Three nodes: replication 3, min ISR 2. ``sasl``: SASL on every
    listener and the StandardAuthorizer (None, the default: PLAINTEXT, no authorizer).
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
        # p50 6.5 ms -> 1.2 ms, latency p50 48 -> 35 ms; docs/results/2026-12-03-benchmarks.md).
        "group.coordinator.append.linger.ms": 0,
        "auto.create.topics.enable": "false",
        "num.network.threads": 2,
        "num.io.threads": 4,
    }
    if sasl is not None:
        listener = f"{SASL_LISTENER}://{HOST}:{node.broker_port}"
        settings.update(sasl.properties(), listeners=f"{listener},"
                        f"CONTROLLER://{HOST}:{node.controller_port}",
                        **{"advertised.listeners": listener})
    lines = [f"# Written by ledger-stream for node {node.node_id}; rewritten on every start."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"
