"""The local broker: it answers, runs transactions, fails clearly, and is driven by PID."""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from ledger_lab.local_kafka import LocalCluster, ensure_jars, jar_cache, ports
from ledger_lab.local_kafka.jars import MARKER
from ledger_lab.local_kafka.toolchain import require_tool
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.kafka.exceptions import (
    BrokerStartError,
    JarFetchError,
    PortInUseError,
    ToolMissingError,
)
from ledger_stream.kafka.topics import create_topics, require_matching

KEY = b"acme/refund/invoice-881"


@pytest.fixture(scope="module")
def libs() -> Path:
    settings = Settings()
    return ensure_jars(jar_cache(settings), settings.kafka_version)


@pytest.mark.kafka
@pytest.mark.timeout(120)
def test_broker_answers_metadata(kafka_bootstrap: str) -> None:
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    assert len(metadata.brokers) >= 1


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value in ``topic`` as a consumer with ``isolation`` sees it, read to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                at_end.add(message.partition())
                continue
            values.append(message.value())
    finally:
        consumer.close()
    assert len(at_end) == partitions, "did not reach the end of every partition"
    return values


def _broker_setting(bootstrap: str, node: str, name: str) -> str:
    resource = ConfigResource(ResourceType.BROKER, node)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return str(entries[name].value)


@pytest.mark.kafka
@pytest.mark.timeout(120)
def test_committed_transaction_is_seen_and_aborted_is_not(ledger_topics: Settings) -> None:
    bootstrap = ledger_topics.kafka_bootstrap
    assert bootstrap is not None
    topic = ledger_topics.topic("intents")
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"{ledger_topics.topic_prefix}-tx",
            "partitioner": "murmur2_random",
        }
    )
    producer.init_transactions(30)
    for value, commit in ((b"committed", True), (b"aborted", False), (b"after", True)):
        producer.begin_transaction()
        producer.produce(topic, key=KEY, value=value)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    partitions = ledger_topics.partitions
    committed = _read_all(bootstrap, topic, partitions, "read_committed")
    uncommitted = _read_all(bootstrap, topic, partitions, "read_uncommitted")
    assert committed == [b"committed", b"after"]
    assert uncommitted == [b"committed", b"aborted", b"after"]


@pytest.mark.timeout(30)
def test_taken_port_gives_port_in_use(tmp_path: Path, libs: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUseError, match=str(port)):
            LocalCluster(tmp_path).start(libs, "4.1.1", base_port=port)
    assert not LocalCluster(tmp_path).status().running


@pytest.mark.timeout(60)
def test_broker_that_cannot_start_reports_its_output(tmp_path: Path) -> None:
    empty_libs = tmp_path / "no-jars"
    empty_libs.mkdir()
    with pytest.raises(BrokerStartError, match="StorageTool"):
        LocalCluster(tmp_path / "cluster").start(empty_libs, "4.1.1")


@pytest.mark.kafka
@pytest.mark.timeout(120)
def test_broker_that_exits_reports_its_log_tail(
    tmp_path: Path, libs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        controller = ports.pick_free_ports(1)[0]
        # The broker is given a port that is already taken, so it dies after launch.
        monkeypatch.setattr(ports, "pick_free_ports", lambda count: [busy, controller])
        cluster = LocalCluster(tmp_path, progress=lambda _: None)
        with pytest.raises(BrokerStartError, match="exited while starting") as failure:
            cluster.start(libs, "4.1.1")
    assert "Address already in use" in failure.value.log_tail
    assert failure.value.log_tail in str(failure.value)
    assert not cluster.status().running


@pytest.mark.timeout(30)
def test_status_of_a_folder_without_cluster(tmp_path: Path) -> None:
    status = LocalCluster(tmp_path).status()
    assert (status.running, status.bootstrap, status.nodes) == (False, None, ())
    assert LocalCluster(tmp_path).stop().stopped == ()


@pytest.mark.timeout(10)
def test_missing_tool_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ToolMissingError, match="install Apache Maven"):
        require_tool("mvn")
    with pytest.raises(ToolMissingError, match="Java 17"):
        require_tool("java")


@pytest.mark.timeout(30)
def test_cached_jars_need_no_maven(libs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")  # Maven cannot run: a cached fetch must not try
    settings = Settings()
    assert ensure_jars(jar_cache(settings), settings.kafka_version) == libs
    assert any(libs.glob("kafka_2.13-*.jar"))


@pytest.mark.timeout(180)
def test_failed_fetch_leaves_no_marker(tmp_path: Path) -> None:
    with pytest.raises(JarFetchError, match="mvn dependency:copy-dependencies"):
        ensure_jars(tmp_path, "0.0.0-no-such-version", progress=lambda _: None)
    assert not (tmp_path / "kafka-0.0.0-no-such-version" / MARKER).exists()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("action", ["up", "status", "down"])
def test_kafka_help(action: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["kafka", action, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"ledger-stream kafka {action}" in out
    assert "LEDGER_KAFKA_BOOTSTRAP" in out and "LEDGER_HOME" in out
    if action == "up":
        assert "--nodes" in out and "--port" in out


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["kafka", "up", "--nodes", "2"], "invalid choice"),
        (["kafka", "up", "--port", "70000"], "within 1..65535"),
        (["kafka", "down", "--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_kafka_flag_exits_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.kafka
@pytest.mark.timeout(240)
@pytest.mark.own_cluster
def test_three_nodes_commit_transactions_with_one_node_killed(tmp_path: Path, libs: Path) -> None:
    cluster = LocalCluster(tmp_path, progress=lambda _: None)
    try:
        status = cluster.start(libs, "4.1.1", nodes=3)
        assert status.bootstrap is not None and status.alive_count == 3
        ports = {p for n in status.nodes for p in (n.broker_port, n.controller_port)}
        assert [n.node_id for n in status.nodes] == [1, 2, 3] and len(ports) == 6
        # Offset commits are written at once, not held by the group coordinator (an
        # at-least-once processor waits for its commit every batch).
        assert _broker_setting(status.bootstrap, "1", "group.coordinator.append.linger.ms") \
            == "0"
        settings = Settings(
            kafka_bootstrap=status.bootstrap,
            topic_prefix="three",
            partitions=3,
            replication_factor=3,
        )
        require_matching(create_topics(status.bootstrap, settings))

        killed = cluster.kill_node(3)
        assert killed == status.nodes[2].pid
        assert cluster.status().alive_count == 2
        producer = Producer(
            {
                "bootstrap.servers": status.bootstrap,
                "transactional.id": "three-tx",
                "partitioner": "murmur2_random",
            }
        )
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce(settings.topic("intents"), key=KEY, value=b"with two of three")
        producer.commit_transaction(60)
        committed = _read_all(status.bootstrap, settings.topic("intents"), 3, "read_committed")
        assert committed == [b"with two of three"]

        # The killed node comes back on its own data (its log folder and its identity kept,
        # not formatted anew), and the cluster still serves what was committed.
        data = tmp_path / "node-3" / "data"
        before = ({p.name for p in data.iterdir()}, (data / "meta.properties").read_text())
        new_pid = cluster.restart_node(3)
        assert new_pid != killed and cluster.status().alive_count == 3
        assert "__cluster_metadata-0" in before[0]
        assert before[0] <= {p.name for p in data.iterdir()}
        assert (data / "meta.properties").read_text() == before[1]
        assert _read_all(status.bootstrap, settings.topic("intents"), 3, "read_committed") \
            == [b"with two of three"]
    finally:
        # SIGTERM, then SIGKILL after 10 s: a three-node KRaft cluster stopped all at once may
        # wait on its own quorum past that (`kafka down` documents the escalation).
        stopped = cluster.stop(timeout_s=10)
    assert not cluster.status().running
    assert len(stopped.stopped) == 3  # every node was running, and was stopped by its PID
