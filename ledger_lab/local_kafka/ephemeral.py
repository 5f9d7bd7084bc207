"""A Kafka for one command's lifetime: the configured cluster, or a local one."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger_lab.local_kafka.cluster import LocalCluster
from ledger_lab.local_kafka.jars import ensure_jars, jar_cache
from ledger_stream.config import Settings


@contextmanager
def kafka_for(settings: Settings, say: Callable[[str], None]) -> Iterator[tuple[str, bool]]:
    """(bootstrap, started_here): ``settings.kafka_bootstrap`` when set, else a single-node
    local Kafka in a temporary folder, stopped by PID and deleted when the block ends."""
    if settings.kafka_bootstrap:
        say(f"using the Kafka cluster at {settings.kafka_bootstrap}")
        yield settings.kafka_bootstrap, False
        return
    libs = ensure_jars(jar_cache(settings), settings.kafka_version, progress=say)
    with tempfile.TemporaryDirectory(prefix="ledger-kafka-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", progress=say)
        try:
            status = cluster.start(libs, settings.kafka_version, nodes=1)
            assert status.bootstrap
            yield status.bootstrap, True
        finally:
            say("stopping the local Kafka")
            cluster.stop()
