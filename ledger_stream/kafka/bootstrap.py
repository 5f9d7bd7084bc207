"""Which Kafka cluster a command talks to."""

from __future__ import annotations

from ledger_lab.local_kafka.cluster import LocalCluster
from ledger_stream.config import Settings
from ledger_stream.kafka.exceptions import NoKafkaError


def resolve_bootstrap(settings: Settings) -> str:
    """``settings.kafka_bootstrap`` when set, else the running local cluster's bootstrap.

    Raises NoKafkaError when neither exists. Does not contact the cluster.
    """
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap
    status = LocalCluster.for_settings(settings).status()
    if status.running and status.bootstrap:
        return status.bootstrap
    raise NoKafkaError("no Kafka: run `ledger-stream kafka up` or set LEDGER_KAFKA_BOOTSTRAP")
