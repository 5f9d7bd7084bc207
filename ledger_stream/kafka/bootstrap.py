"""Which Kafka cluster a command talks to.

The address comes from the settings (``LEDGER_KAFKA_BOOTSTRAP``, ``--bootstrap``, a settings
file). Without one, the development clusters that installed packages declare are asked:
each entry point of the group ``ledger_stream.kafka_clusters`` names a function
``(Settings) -> str | None`` returning the bootstrap of a cluster it runs for these settings
(the lab's local Kafka, started by ``ledger-stream kafka up``, is one). The product never
imports such a package: it only reads the entry points, so it runs without any installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib import metadata
from importlib.util import find_spec

from ledger_stream.config import Settings
from ledger_stream.kafka.exceptions import NoKafkaError

CLUSTER_FINDERS = "ledger_stream.kafka_clusters"

ClusterFinder = Callable[[Settings], str | None]


def resolve_bootstrap(settings: Settings) -> str:
    """``settings.kafka_bootstrap`` when set, else the first running development cluster's
    bootstrap (in entry point name order).

    Raises NoKafkaError when neither exists. Does not contact the cluster.
    """
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap
    for find in cluster_finders():
        bootstrap = find(settings)
        if bootstrap:
            return bootstrap
    raise NoKafkaError("no Kafka: run `ledger-stream kafka up` or set LEDGER_KAFKA_BOOTSTRAP")


def cluster_finders() -> Iterator[ClusterFinder]:
    """The installed development cluster finders, sorted by entry point name. A finder
    whose package is not installed (the product without the lab) is none."""
    for entry in sorted(metadata.entry_points(group=CLUSTER_FINDERS), key=lambda e: e.name):
        if find_spec(entry.module.partition(".")[0]) is not None:
            yield entry.load()
