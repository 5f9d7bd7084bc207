"""SIGTERM ends a start-up wait: on a real three-node cluster whose node leading the
recorded layout's partition is down, a processor, a connector and the view reach the
cluster (the other nodes answer) but cannot read the layout, so they wait for it (up to
``startup_wait_s``, 300 s by default); told to stop then, each ends within seconds, with
status 0 and a line saying so."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from ledger_lab.harness.processes import Proc, start_processor
from ledger_stream.config import Settings
from ledger_stream.kafka import topics
from ledger_stream.kafka.layout import Layout
from ledger_stream.processor.preflight import check_topics
from tests.own_clusters import own_cluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.own_cluster, pytest.mark.kafka]

WAITING = "partition layout not readable yet; retrying"
STOPPED_WITHIN_S = 10.0  # one metadata request (5 s) and a pause, far below the wait's 300 s


@pytest.fixture(scope="module")
def layout_leader_down(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings whose layout is recorded, addressed to a node still up after the node
    leading the changelog's partition 0 (where the layout is) was killed."""
    with own_cluster(tmp_path_factory, "three-nodes", nodes=3) as cluster:
        bootstrap = cluster.status().bootstrap
        assert bootstrap is not None
        settings = Settings(kafka_bootstrap=bootstrap, partitions=2, replication_factor=1,
                            topic_prefix=f"ss-{uuid.uuid4().hex[:6]}")
        topics.require_matching(topics.create_topics(bootstrap, settings))
        assert check_topics(bootstrap, settings) == Layout(2)  # records the layout
        meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
        leader = meta.topics[settings.topic("changelog")].partitions[0].leader
        cluster.kill_node(leader)
        up = next(n for n in cluster.status().nodes if n.node_id != leader)
        yield settings.model_copy(update={"kafka_bootstrap": f"127.0.0.1:{up.broker_port}"})


def _start(kind: str, settings: Settings, tmp_path: Path) -> Proc:
    log = tmp_path / f"{kind}.log"
    if kind == "processor":
        return start_processor(settings, tmp_path / "state", log)
    common = ["--bootstrap", settings.kafka_bootstrap or "", "--topic-prefix",
              settings.topic_prefix]
    if kind == "view":
        return Proc(["view", "--no-auth", "--port", "0", "--state-dir", str(tmp_path / "view"),
                     *common], log)
    return Proc(["connector", "http", "--name", "payments", "--base-url", "http://127.0.0.1:9",
                 *common, "--metrics-port", "off"], log, env={"LEDGER_DEV_MODE": "1"})


@pytest.mark.parametrize("kind", ["processor", "connector", "view"])
def test_sigterm_ends_the_wait_for_an_unreadable_layout_at_once(
        layout_leader_down: Settings, kind: str, tmp_path: Path) -> None:
    proc = _start(kind, layout_leader_down, tmp_path)
    try:
        deadline = time.monotonic() + 150
        while WAITING not in proc.log.read_text(errors="replace"):
            assert proc.alive() and time.monotonic() < deadline, proc.tail()
            time.sleep(0.5)
        os.kill(proc.pid, signal.SIGTERM)
        started = time.monotonic()
        try:
            code: int | None = proc.popen.wait(STOPPED_WITHIN_S + 20)
        except Exception:  # noqa: BLE001 - reported below
            code = None
        took = time.monotonic() - started
    finally:
        proc.stop(5)
    print(f"{kind} stopped in {took:.1f} s")
    assert code == 0 and took < STOPPED_WITHIN_S, (code, took, proc.tail())
    assert f"{kind} stopped while waiting for Kafka at start-up" in proc.tail(), proc.tail()
