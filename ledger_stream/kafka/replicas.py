"""Which partitions the brokers refuse ``acks=all`` writes to: fewer in-sync replicas than
the topic's ``min.insync.replicas`` (a broker down in a cluster of replication 3, min ISR 2,
is fine; two are not). Asked when writes fail, so the log says why rather than only that."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.reach import admin_answer

MIN_ISR = "min.insync.replicas"


def below_min_isr(bootstrap: str, topics: list[str], timeout_s: float = 5.0) -> list[str]:
    """``"topic[p]: n in-sync of min m"`` (or ``"topic[p]: no leader"``) per partition of
    ``topics`` that refuses acknowledged writes now; [] when all accept them or the cluster
    cannot be asked (the caller's own error then stands alone)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    try:
        meta = admin.list_topics(timeout=timeout_s).topics
        wanted = [t for t in topics if t in meta]
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in wanted]
        futures = admin.describe_configs(resources, request_timeout=timeout_s) if wanted else {}
        min_isr = {res.name: int(admin_answer(admin, future, timeout_s, None, "min ISR")
                                 [MIN_ISR].value) for res, future in futures.items()}
    except (KafkaException, TimeoutError, KeyError, ValueError):
        return []
    found = []
    for topic in wanted:
        for p, part in sorted(meta[topic].partitions.items()):
            if part.leader < 0:
                found.append(f"{topic}[{p}]: no leader")
            elif len(part.isrs) < min_isr[topic]:
                found.append(f"{topic}[{p}]: {len(part.isrs)} in-sync of min {min_isr[topic]}")
    return found
