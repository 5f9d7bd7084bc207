"""Start-up checks wait out a broker restart: on a real cluster whose only broker is down
for longer than one request's bound, a processor's and a connector's start-up checks (topic
counts, the recorded partition layout) keep asking until it is back, up to
``startup_wait_s``, and a real layout mismatch is still refused at once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from ledger_lab.local_kafka import LocalCluster
from ledger_stream.config import Settings
from ledger_stream.kafka import topics
from ledger_stream.kafka.layout import Layout, LayoutRefused, check_roles
from ledger_stream.processor.exceptions import StartupRefused
from ledger_stream.processor.preflight import check_topics
from tests.own_clusters import own_cluster

pytestmark = [pytest.mark.timeout(360), pytest.mark.own_cluster, pytest.mark.kafka]

DOWN_S = 40.0  # longer than the 30 s one read of the layout used to be allowed


@pytest.fixture(scope="module")
def one_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with own_cluster(tmp_path_factory, "one-node", nodes=1) as cluster:
        yield cluster


def _in_thread(call: object) -> tuple[threading.Thread, dict[str, object]]:
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = call()  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out["error"] = exc
        out["at"] = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_start_up_checks_wait_out_a_broker_restart(one_node: LocalCluster) -> None:
    bootstrap = one_node.status().bootstrap
    assert bootstrap is not None
    settings = Settings(kafka_bootstrap=bootstrap, topic_prefix=f"sw-{uuid.uuid4().hex[:6]}",
                        partitions=2, replication_factor=1, kafka_startup_wait_s=240)
    topics.require_matching(topics.create_topics(bootstrap, settings))
    assert check_topics(bootstrap, settings) == Layout(2)  # records the layout

    one_node.kill_node(1)
    down_at = time.monotonic()
    processor, p_out = _in_thread(lambda: check_topics(bootstrap, settings))
    names = [settings.topic(r) for r in ("dispatch", "attempts", "receipts")]
    connector, c_out = _in_thread(lambda: check_roles(
        bootstrap, settings.topic("changelog"), names,
        wait_s=settings.connection.startup_wait_s))
    time.sleep(DOWN_S)
    assert processor.is_alive() and connector.is_alive(), (p_out, c_out)  # still waiting
    back_at = time.monotonic()  # restart_node returns once the node is ready: the
    one_node.restart_node(1)  # checks may answer before it does
    processor.join(120)
    connector.join(120)
    assert p_out.get("value") == Layout(2), p_out
    assert c_out.get("value") == Layout(2), c_out
    assert float(p_out["at"]) >= back_at and back_at - down_at >= DOWN_S  # type: ignore[arg-type]


def test_a_real_layout_mismatch_is_refused_at_once(one_node: LocalCluster) -> None:
    bootstrap = one_node.status().bootstrap
    assert bootstrap is not None
    settings = Settings(kafka_bootstrap=bootstrap, topic_prefix=f"sw-{uuid.uuid4().hex[:6]}",
                        partitions=2, replication_factor=1, kafka_startup_wait_s=240)
    topics.require_matching(topics.create_topics(bootstrap, settings))
    assert check_topics(bootstrap, settings) == Layout(2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for role in ("intents", "attempts", "dispatch", "receipts", "changelog"):
        for future in admin.create_partitions(
                [NewPartitions(settings.topic(role), 4)]).values():
            future.result(30)
    started = time.monotonic()
    with pytest.raises(StartupRefused, match="repartition --to 4"):
        check_topics(bootstrap, settings)
    with pytest.raises(LayoutRefused, match="repartition --to 4"):
        check_roles(bootstrap, settings.topic("changelog"),
                    [settings.topic(r) for r in ("dispatch", "attempts", "receipts")],
                    wait_s=240)
    assert time.monotonic() - started < 30
