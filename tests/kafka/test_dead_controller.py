"""The start-up checks while the broker a client was told is the controller is down.

Found by the chaos soak: a processor started 4 s after the active controller was killed
waited 110 s to start. librdkafka sends a topic's DescribeConfigs (and a group's
IncrementalAlterConfigs) to the controller id of its last metadata answer, and waits for
that broker to come back; on KRaft the id is a random live broker, and a broker killed a
moment ago still counts as live until its session times out. Here, on a real 3-node
cluster, the broker the client holds as controller is killed for good: both checks must
answer within seconds, not wait out their 30 s bounds (and their tries) on it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from ledger_lab.local_kafka import LocalCluster
from ledger_stream.config import Settings
from ledger_stream.kafka import topics
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.processor import preflight
from ledger_stream.processor.clients import group_config
from tests.own_clusters import own_cluster

pytestmark = [pytest.mark.timeout(400), pytest.mark.own_cluster]

WITHIN_S = 10.0  # before the fix: at least 30 s each (until the broker came back)


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with own_cluster(tmp_path_factory, "dead-controller", nodes=3) as cluster:
        yield cluster


def _settled_admin(bootstrap: str) -> tuple[AdminClient, int]:
    """A client connected to every broker, and the controller its last metadata answer
    named. librdkafka asks for metadata again each time a connection comes up; once all are
    up nothing makes it ask again (it knows no topics to watch), as with the soak's
    processor, so the controller id it holds is the one returned here."""
    client = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    brokers = client.list_topics(timeout=30).brokers
    for node in brokers:  # a BROKER resource's request goes to that broker: a connection
        resource = ConfigResource(ResourceType.BROKER, str(node))
        client.describe_configs([resource], request_timeout=30)[resource].result(30)
    time.sleep(1.0)  # the metadata answers those connections asked for
    return client, client.list_topics(timeout=30).controller_id


def _admins_told_the_same_controller(bootstrap: str) -> tuple[AdminClient, AdminClient, int]:
    """Two such clients told the same controller (each answer draws it among live brokers)."""
    first, controller = _settled_admin(bootstrap)
    for _ in range(30):
        second, other = _settled_admin(bootstrap)
        if other == controller:
            return first, second, controller
    raise AssertionError("thirty clients were never told the same controller")


def test_the_checks_answer_while_the_clients_controller_is_down(
        three_nodes: LocalCluster) -> None:
    bootstrap = three_nodes.status().bootstrap
    assert bootstrap is not None
    settings = Settings(kafka_bootstrap=bootstrap, partitions=2, replication_factor=3,
                        topic_prefix=f"ctl-{uuid.uuid4().hex[:6]}", group_protocol="consumer")
    topics.require_matching(topics.create_topics(bootstrap, settings))
    describing, configuring, controller = _admins_told_the_same_controller(bootstrap)
    assert controller in (1, 2, 3)
    assert three_nodes.kill_node(controller) is not None

    started = time.monotonic()
    config = preflight._describe(describing, settings.topic("intents"), 30.0)
    described_s = time.monotonic() - started
    assert "message.timestamp.type" in config
    assert described_s < WITHIN_S, f"described in {described_s:.1f} s"

    started = time.monotonic()
    assert preflight.configure_group(configuring, settings.processor.consumer_group,
                                     group_config(settings), 30.0)
    configured_s = time.monotonic() - started
    assert configured_s < WITHIN_S, f"configured in {configured_s:.1f} s"
