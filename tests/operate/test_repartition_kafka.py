"""``ledger-stream repartition --to N`` on a real broker: keys succeeded and keys waiting for
a connector (a deadline armed) on 3 partitions, grown to 6 with the processor stopped; every
key asked again is answered from its original state, nothing is dispatched twice, and the
waiting keys' deadlines still fire at their new partitions."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from ledger_lab.harness.processes import Proc
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.layout import Layout, read_layout, topic_counts
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.changelog import TICK_KEY
from ledger_stream.serde import AvroCodec
from tests.operate.repartition_support import deciding_intents, run_repartition
from tests.processor.support import read_all, read_raw

pytestmark = [pytest.mark.timeout(420)]

DONE = [f"acme/refund/done-{i}" for i in range(10)]
WAITING = [f"acme/refund/wait-{i}" for i in range(6)]
STALL_MS = 45_000
TO = 6


def dispatches(settings: Settings) -> Counter[str]:
    """Distinct dispatches (attempts) per key. The topic also carries grants, holds and
    dones, and a stalled dispatch is offered again under its own id (connectors skip it)."""
    found = read_raw(settings.kafka_bootstrap or "", settings.topic("dispatch"))
    ids = {(e.key, e.dispatch_id, e.attempt) for r in found
           if isinstance(e := r.event(), ev.Dispatch)}
    return Counter(key for key, _, _ in ids)


def test_repartition_moves_every_key_with_its_state_and_deadlines(
        ledger_topics: Settings, tmp_path: Path) -> None:
    from ledger_lab.harness.processes import processor_group

    settings = ledger_topics.model_copy(
        update={"consumer_group": processor_group(ledger_topics)})
    moved = [k for k in DONE + WAITING
             if partition_for(k, settings.partitions) != partition_for(k, TO)]
    assert moved and set(moved) & set(WAITING), "the test needs keys that move"
    sandbox = SandboxProc(tmp_path / "sandbox.db")
    stack = Stack(settings, tmp_path, processor_env={"LEDGER_STALL_AFTER_MS": str(STALL_MS)})
    try:
        connector = stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
        first = {k: stack.submit_nowait(k, {"amount": 5}, "payments") for k in DONE}
        first |= {k: stack.submit_nowait(k, {"amount": 5}, "nowhere") for k in WAITING}
        stack.producer.flush()
        answers = {k: stack.await_key(k, {ev.ReceiptStatus.SUCCEEDED}) for k in DONE}
        for k in WAITING:
            stack.await_answer(first[k])
        assert stack.processor.stop(30) == 0
        assert connector.stop(30) == 0
        # A Tick after the committed offsets only moves a clock: the inputs count as decided.
        for p in range(settings.partitions):
            tick = AvroCodec().encode(ev.Tick(p, "test", int(time.time() * 1000)))
            stack.producer.send_raw("attempts", TICK_KEY, tick, partition=p)
        stack.producer.flush()

        grown = run_repartition(settings, tmp_path, TO)
        assert grown.popen.returncode == 0, grown.tail()
        assert read_layout(settings.kafka_bootstrap or "", settings.topic("changelog")) \
            == Layout(TO, grown_from=settings.partitions)
        again = run_repartition(settings, tmp_path, TO)  # re-runnable: nothing left to do
        assert again.popen.returncode == 0 and "already at 6" in again.tail(), again.tail()

        restarted_ms = int(time.time() * 1000)
        stack.restart_processor(kill=False)
        stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
        second = {k: stack.submit_nowait(k, {"amount": 5}, first[k].target)
                  for k in DONE + WAITING}
        stack.producer.flush()
        for k in DONE:
            receipt = stack.await_answer(second[k])
            assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED, (k, receipt)
            assert receipt.external_id == answers[k].external_id != "", k
        for k in WAITING:
            assert stack.await_answer(second[k]).key_status is ev.ReceiptStatus.ACCEPTED, k
        deadline = time.monotonic() + STALL_MS / 1000 + 60
        stalled: set[str] = set()
        while set(WAITING) - stalled and time.monotonic() < deadline:
            stalled = {a.key for a in read_all(settings, "alerts")
                       if a.kind is ev.AlertKind.STALLED and a.at_ms >= restarted_ms}
            time.sleep(2)
        assert stalled >= set(WAITING), (stalled, stack.processor.tail())
        assert set(deciding_intents(settings).values()) == {1}, deciding_intents(settings)
        for k in DONE + WAITING:  # one call per key at the target
            calls = [r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == k]
            assert len(calls) == (k in DONE), (k, calls)
        assert not read_raw(settings.kafka_bootstrap or "", settings.topic("dlq"))
    finally:
        stack.close()
        sandbox.stop()


def test_repartition_refuses_while_processors_run_or_inputs_wait(
        ledger_topics: Settings, tmp_path: Path) -> None:
    from ledger_lab.harness.processes import processor_group

    settings = ledger_topics.model_copy(
        update={"consumer_group": processor_group(ledger_topics)})
    stack = Stack(settings, tmp_path)
    try:
        stack.await_answer(stack.submit("acme/refund/r-1", {"amount": 5}, "nowhere"))
        running = run_repartition(settings, tmp_path, TO)
        assert running.popen.returncode != 0
        assert "stop every processor first" in running.tail(), running.tail()
        assert stack.processor.stop(30) == 0
        waiting = stack.submit("acme/refund/r-2", {"amount": 5}, "nowhere")
        undecided = run_repartition(settings, tmp_path, TO)
        assert undecided.popen.returncode != 0
        home = partition_for(waiting.key, settings.partitions)
        assert f"inputs not decided yet in {settings.topic('intents')}[{home}]" \
            in undecided.tail(), undecided.tail()
        assert read_layout(settings.kafka_bootstrap or "", settings.topic("changelog")) \
            == Layout(settings.partitions), "a refused run changes nothing"
        names = [settings.topic(role) for role in ("intents", "attempts", "changelog")]
        assert set(topic_counts(settings.kafka_bootstrap or "", names).values()) \
            == {settings.partitions}
    finally:
        stack.close()


def test_repartition_waits_for_a_moved_keys_pre_grant_to_end(
        ledger_topics: Settings, tmp_path: Path) -> None:
    """A moved key's Dispatch carries a pre-grant nobody claimed yet: a claim its fencer
    writes to the old partition after the check would be forwarded and lose its time, so
    the migration refuses until the pre-grant's end plus twice the skew, then runs."""
    from ledger_lab.harness.processes import processor_group

    settings = ledger_topics.model_copy(
        update={"consumer_group": processor_group(ledger_topics)})
    key = next(k for k in (f"acme/refund/pg-{i}" for i in range(100))
               if partition_for(k, settings.partitions) != partition_for(k, TO))
    stack = Stack(settings, tmp_path, processor_env={"LEDGER_PREGRANT_LEASE_MS": "4000"})
    try:
        stack.await_answer(stack.submit(key, {"amount": 5}, "nowhere"))
        assert stack.processor.stop(30) == 0
        (dispatch,) = [d for d in read_all(settings, "dispatch") if isinstance(d, ev.Dispatch)]
        assert dispatch.lease_until_ms > 0, "the test needs a pre-granted Dispatch"
        refused = run_repartition(settings, tmp_path, TO)
        assert refused.popen.returncode != 0
        assert "hold a pre-grant" in refused.tail() and key in refused.tail(), refused.tail()
        assert read_layout(settings.kafka_bootstrap or "", settings.topic("changelog")) \
            == Layout(settings.partitions), "a refused run changes nothing"
        skew_s = settings.processor.clock_skew_ms / 1000
        time.sleep(max(0.0, dispatch.lease_until_ms / 1000 + 2 * skew_s + 0.5 - time.time()))
        grown = run_repartition(settings, tmp_path, TO)
        assert grown.popen.returncode == 0, grown.tail()
    finally:
        stack.close()


def wait_decided(settings: Settings, partitions: int, timeout_s: float = 60.0) -> None:
    """Until the running processors' committed offsets cover every input record."""
    from ledger_stream.operate.repartition import (
        RepartitionRefused,
        _committed,
        _require_decided,
    )

    bootstrap = settings.kafka_bootstrap or ""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _require_decided(bootstrap, settings,
                             _committed(bootstrap, settings, partitions, 10), 10)
            return
        except RepartitionRefused:
            assert time.monotonic() < deadline, "the processor never caught up"
            time.sleep(1)


def test_repartition_carries_freezes_and_held_keys(ledger_topics: Settings,
                                                   tmp_path: Path) -> None:
    """Frozen with keys held, grown (a first run crashed before recording the layout, a
    second finished): the freeze holds at the new partitions too, the unfreeze releases
    every held key once wherever it moved, and the freeze's command retried afterwards is a
    repeat at every partition."""
    from ledger_lab.harness.processes import processor_group

    settings = ledger_topics.model_copy(
        update={"consumer_group": processor_group(ledger_topics)})
    common = ["--bootstrap", settings.kafka_bootstrap or "", "--topic-prefix",
              settings.topic_prefix, "--group", settings.consumer_group]

    def contain(*args: str) -> None:
        proc = Proc([*args, "refund", "--tenant", "acme", "--wait", "60", *common],
                    tmp_path / f"contain-{time.monotonic_ns()}.log")
        assert proc.popen.wait(60) == 0, proc.tail()

    def keys(name: str, moves: bool, n: int) -> list[str]:
        found = (f"acme/refund/{name}-{i}" for i in range(1000))
        return [k for k in found if (partition_for(k, TO) != partition_for(
            k, settings.partitions)) == moves][:n]

    held_keys = keys("held", True, 3) + keys("held", False, 1)
    freeze = ("freeze", "--reason", "drill", "--event-id", "drill-freeze")
    stack = Stack(settings, tmp_path)
    try:
        contain(*freeze)
        for key in held_keys:
            assert stack.await_answer(stack.submit(key, {"amount": 5}, "nowhere")).status \
                is ev.ReceiptStatus.HELD
        assert stack.processor.stop(30) == 0

        crashed = Proc(["repartition", "--to", str(TO), *common], tmp_path / "crashed.log",
                       env={"LEDGER_FAILPOINT": "repartition_before_layout"})
        assert crashed.popen.wait(120) == -9, crashed.tail()
        grown = run_repartition(settings, tmp_path, TO)
        assert grown.popen.returncode == 0, grown.tail()

        stack.restart_processor(kill=False)
        [late] = keys("late", True, 1)  # a new partition's key: the freeze holds it too
        assert stack.await_answer(stack.submit(late, {"amount": 5}, "nowhere"), 90).status \
            is ev.ReceiptStatus.HELD
        contain("unfreeze", "--event-id", "drill-unfreeze")
        for key in [*held_keys, late]:
            stack.await_key(key, {ev.ReceiptStatus.ACCEPTED})

        contain(*freeze)  # retried after the unfreeze: a repeat everywhere, nothing frozen
        wait_decided(settings, TO)
        [fresh] = keys("fresh", True, 1)
        answer = stack.await_answer(stack.submit(fresh, {"amount": 5}, "nowhere"))
        assert answer.status is ev.ReceiptStatus.ACCEPTED, answer
        assert set(dispatches(settings).values()) == {1}, dispatches(settings)
        assert set(dispatches(settings)) == {*held_keys, late, fresh}
        assert not read_raw(settings.kafka_bootstrap or "", settings.topic("dlq"))
    finally:
        stack.close()


def test_repartition_refuses_to_shrink_or_to_stop_short_of_the_topics(
        ledger_topics: Settings, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    from ledger_stream.kafka.layout import check_layout, write_layout

    s = ledger_topics
    bootstrap, changelog = s.kafka_bootstrap or "", s.topic("changelog")
    roles = ("intents", "attempts", "changelog")
    check_layout(bootstrap, changelog, {s.topic(r): s.partitions for r in roles}, record=True)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(s.topic("intents"), TO)],
                                          operation_timeout=30).values():
        future.result()  # grown by hand beyond what is asked next
    short = run_repartition(s, tmp_path, TO - 1)
    assert short.popen.returncode != 0
    assert f"only growing is supported: the state is at {s.partitions}" in short.tail()
    write_layout(bootstrap, changelog, Layout(TO + 2))  # a state recorded at more
    smaller = run_repartition(s, tmp_path, TO + 1)
    assert smaller.popen.returncode != 0
    assert f"only growing is supported: the state is at {TO + 2}" in smaller.tail()
    counts = topic_counts(bootstrap, [s.topic(r) for r in roles])
    assert counts == {s.topic("intents"): TO, s.topic("attempts"): s.partitions,
                      changelog: s.partitions}, "a refused run changes nothing"
