"""A real Apache Kafka for development and tests, without Docker (docs/design.md).

:func:`ensure_jars` fetches the broker's jars from Maven Central once; :class:`LocalCluster`
formats, starts, watches and stops one or three KRaft nodes on loopback, by PID.
"""

from ledger_lab.local_kafka.cluster import LocalCluster
from ledger_lab.local_kafka.jars import ensure_jars, jar_cache
from ledger_lab.local_kafka.status import ClusterStatus, NodeStatus, StopResult

__all__ = [
    "ClusterStatus",
    "LocalCluster",
    "NodeStatus",
    "StopResult",
    "ensure_jars",
    "jar_cache",
]
