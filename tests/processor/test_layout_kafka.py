"""Growing the topics under the ledger's state: a processor refuses to start on topics at
another partition count than the state was built under (naming the migration), and one that
is running stops deciding when they grow; no key whose partition moved is dispatched again
or sent to the DLQ."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from ledger_lab.harness.processes import Proc, processor_group, start_processor
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.layout import Layout, check_layout, read_layout
from ledger_stream.kafka.partitioner import partition_for
from tests.processor.support import read_raw

pytestmark = [pytest.mark.timeout(240)]

KEYS = [f"acme/refund/layout-{i}" for i in range(16)]
GROWN = 6


def grow(settings: Settings, roles: tuple[str, ...], to: int) -> None:
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    news = [NewPartitions(settings.topic(role), to) for role in roles]
    for future in admin.create_partitions(news, operation_timeout=30).values():
        future.result()


def dispatches(settings: Settings) -> Counter[str]:
    """Distinct dispatches (attempts) per key. The topic also carries grants, holds and
    dones, and a stalled dispatch is offered again under its own id (connectors skip it)."""
    found = read_raw(settings.kafka_bootstrap or "", settings.topic("dispatch"))
    ids = {(e.key, e.dispatch_id, e.attempt) for r in found
           if isinstance(e := r.event(), ev.Dispatch)}
    return Counter(key for key, _, _ in ids)


def submit_all(stack: Stack) -> dict[str, ev.Intent]:
    intents = {key: stack.submit_nowait(key, {"amount": 5}, "payments") for key in KEYS}
    stack.producer.flush()
    return intents


def moved(settings: Settings) -> list[str]:
    return [k for k in KEYS
            if partition_for(k, settings.partitions) != partition_for(k, GROWN)]


def test_grown_at_rest_the_processor_refuses_to_start(stack: Stack, tmp_path: Path) -> None:
    settings = stack.settings
    assert moved(settings), "the test needs keys whose partition moves"
    for intent in submit_all(stack).values():
        stack.await_answer(intent)
    assert stack.processor.stop(30) == 0
    assert set(dispatches(settings).values()) == {1}
    grow(settings, ("intents", "attempts", "changelog"), GROWN)

    again = start_processor(settings, tmp_path / "state", tmp_path / "again.log")
    stack.procs.append(again)
    deadline = time.monotonic() + 90
    while again.alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not again.alive(), again.tail()
    log = again.tail(60)
    assert "partition count changed" in log, log
    assert f"ledger-stream repartition --to {GROWN}" in log, log
    submit_all(stack)  # the agents ask again: the intents wait in Kafka
    time.sleep(3)
    assert set(dispatches(settings).values()) == {1}


def test_grown_while_running_the_processor_stops_deciding(stack: Stack,
                                                          tmp_path: Path) -> None:
    settings = stack.settings
    first = {k: stack.await_answer(i) for k, i in submit_all(stack).items()}
    grow(settings, ("intents", "attempts", "changelog"), GROWN)
    deadline = time.monotonic() + 60
    while "partition layout changed" not in stack.processor.tail(200):
        assert time.monotonic() < deadline, stack.processor.tail()
        time.sleep(0.5)
    waiting = submit_all(stack)
    time.sleep(8)
    assert set(dispatches(settings).values()) == {1}
    assert not read_raw(settings.kafka_bootstrap or "", settings.topic("dlq"))
    assert stack.processor.alive()
    assert f"ledger-stream repartition --to {GROWN}" in stack.processor.tail(200)

    # The migration on topics grown already: the intents that waited (on the partition
    # their producer chose before or after it saw the growth) are answered from each key's
    # state once the processor runs at the new count.
    assert stack.processor.stop(30) == 0
    grown = Proc(["repartition", "--to", str(GROWN), "--bootstrap",
                  settings.kafka_bootstrap or "", "--topic-prefix", settings.topic_prefix,
                  "--group", processor_group(settings)], tmp_path / "repartition.log")
    assert grown.popen.wait(120) == 0, grown.tail()
    stack.restart_processor(kill=False)
    for key, intent in waiting.items():
        answer = stack.await_answer(intent, timeout_s=90)
        assert (answer.key_status, answer.attempts) == (first[key].key_status,
                                                        first[key].attempts), (key, answer)
    assert set(dispatches(settings).values()) == {1}
    assert not read_raw(settings.kafka_bootstrap or "", settings.topic("dlq"))


def _exit_of(proc: Proc, timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while proc.alive() and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not proc.alive(), proc.tail()
    return proc.popen.returncode


def test_connectors_and_the_view_refuse_topics_at_another_count(
        ledger_topics: Settings, tmp_path: Path) -> None:
    s = ledger_topics
    bootstrap = s.kafka_bootstrap or ""
    common = ["--bootstrap", bootstrap, "--topic-prefix", s.topic_prefix]
    assert read_layout(bootstrap, s.topic("changelog")) is None
    counts = {s.topic(role): s.partitions for role in ("intents", "attempts", "changelog")}
    check_layout(bootstrap, s.topic("changelog"), counts, record=True)  # as a processor does
    assert read_layout(bootstrap, s.topic("changelog")) == Layout(s.partitions)
    grow(s, ("dispatch", "attempts"), GROWN)
    connector = Proc(["connector", "http", "--name", "payments", "--base-url",
                      "http://127.0.0.1:9", *common], tmp_path / "connector.log")
    view = Proc(["view", "--no-auth", "--port", "0", "--state-dir", str(tmp_path / "view"),
                 *common], tmp_path / "view.log")
    for proc in (connector, view):
        assert _exit_of(proc) != 0
        assert "partition count" in proc.tail(), proc.tail()
        assert f"ledger-stream repartition --to {GROWN}" in proc.tail()
