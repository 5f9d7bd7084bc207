"""The local cluster's address, for the product's ``resolve_bootstrap``.

Declared in pyproject as the ``local`` entry point of ``ledger_stream.kafka_clusters``: a
command (or an SDK client) given no bootstrap talks to the cluster ``ledger-stream kafka up``
started under the same ``--home``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_lab.local_kafka.cluster import LocalCluster

if TYPE_CHECKING:
    from ledger_stream.config import Settings


def running_bootstrap(settings: Settings) -> str | None:
    """The bootstrap of the local cluster of ``settings.home`` when it runs, else None."""
    status = LocalCluster.for_settings(settings).status()
    if status.running and status.bootstrap:
        return status.bootstrap
    return None
