"""A local Kafka cluster of its own for a test module (tests marked ``own_cluster``): started
from the cached jars, stopped by its PIDs whatever the tests did to its nodes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ledger_lab.local_kafka import LocalCluster, ensure_jars, jar_cache
from ledger_stream.config import Settings


@contextmanager
def own_cluster(tmp_path_factory: pytest.TempPathFactory, name: str,
                nodes: int) -> Iterator[LocalCluster]:
    settings = Settings()
    libs = ensure_jars(jar_cache(settings), settings.kafka_version)
    cluster = LocalCluster(tmp_path_factory.mktemp(name), progress=lambda _: None)
    try:
        cluster.start(libs, settings.kafka_version, nodes=nodes)
        yield cluster
    finally:
        cluster.stop()
