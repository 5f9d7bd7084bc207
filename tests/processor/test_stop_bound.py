"""A processor told to stop (SIGTERM) while Kafka does not answer still ends within its
bound (25 s, inside the usual 30 s grace before a SIGKILL): on a real broker paused with
SIGSTOP, a batch's flush and transactional calls are cut short instead of waiting out their
own 30-35 s timeouts, and leaving the group is not waited for past its bound."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_lab.local_kafka import LocalCluster
from ledger_stream.config import Settings
from ledger_stream.kafka import topics
from ledger_stream.processor.runtime import STOP_BOUND_S
from tests.own_clusters import own_cluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.own_cluster, pytest.mark.kafka]


@pytest.fixture(scope="module")
def one_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with own_cluster(tmp_path_factory, "one-node", nodes=1) as cluster:
        yield cluster


def _wait_for(proc_log: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in proc_log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {text!r} in {proc_log}"
        time.sleep(0.5)


def test_sigterm_ends_the_processor_within_its_bound_while_kafka_hangs(
        one_node: LocalCluster, tmp_path: Path) -> None:
    status = one_node.status()
    bootstrap, broker_pid = status.bootstrap, status.nodes[0].pid
    assert bootstrap is not None and broker_pid is not None
    settings = Settings(kafka_bootstrap=bootstrap, topic_prefix=f"sb-{uuid.uuid4().hex[:6]}",
                        partitions=2, replication_factor=1)
    topics.require_matching(topics.create_topics(bootstrap, settings))
    log = tmp_path / "processor.log"
    # Ticks every 100 ms: a batch (a transaction) is nearly always in flight.
    proc = start_processor(settings, tmp_path / "state", log,
                           env={"LEDGER_TICK_INTERVAL_MS": "100"})
    try:
        _wait_for(log, "partitions assigned", 120)
        time.sleep(2)
        os.kill(broker_pid, signal.SIGSTOP)  # connections stay open; nothing answers
        try:
            time.sleep(10)  # a flush or commit begun now waits on the broker past the stop
            assert proc.alive(), proc.tail()
            os.kill(proc.pid, signal.SIGTERM)
            started = time.monotonic()
            try:
                code = proc.popen.wait(STOP_BOUND_S + 10)
            except Exception:  # noqa: BLE001 - reported below
                code = None
            took = time.monotonic() - started
        finally:
            os.kill(broker_pid, signal.SIGCONT)
    finally:
        proc.stop(5)
    assert code == 0, (code, took, proc.tail(30))
    print(f"stopped in {took:.1f} s")
    assert took < STOP_BOUND_S, (took, proc.tail(30))
