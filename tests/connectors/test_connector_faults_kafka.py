"""The connector under the faults a hostile review reproduced, on the real broker, the real
processor and the payments sandbox. Effects are read from the sandbox's own ledger.

Defect 1: a connector waiting for an answer hung when its partition was revoked and served
none of its other partitions. Defect 2: a failed produce was taken as acknowledged and the
dispatch offset committed. Defect 3: processor lag made the connector mint new claim ids,
orphaning the first grant. Defect 7: the fast path re-sent dispatches the ledger had long
settled when a new consumer group read the topic from the start.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.reader import read_topic

pytestmark = pytest.mark.timeout(240)

ARGS = {"amount": 700, "currency": "EUR", "to": "cust-3"}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}


def connector(stack: Stack, sandbox: SandboxProc, *extra: str, env: dict | None = None):
    return stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url, *extra,
                           env=env)


def keys_on_every_partition(partitions: int, per: int = 1) -> list[str]:
    keys: dict[int, list[str]] = {p: [] for p in range(partitions)}
    while any(len(k) < per for k in keys.values()):
        key = f"acme/refund/{uuid.uuid4().hex[:10]}"
        if len(keys[partition_for(key, partitions)]) < per:
            keys[partition_for(key, partitions)].append(key)
    return [k for ks in keys.values() for k in ks]


def attempt_events(stack: Stack) -> list:
    return [e for e in read_topic(stack.bootstrap, stack.settings.topic("attempts"))
            if not isinstance(e, ev.Tick)]


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def committed(stack: Stack, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(stack.settings.topic("dispatch"), p)
               for p in range(stack.settings.partitions)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)
                if tp.offset >= 0}
    finally:
        consumer.close()


def group_of(stack: Stack) -> str:
    return f"{stack.settings.topic_prefix}.connector.sandbox"


def test_a_revoked_partition_ends_the_wait_and_the_other_partitions_go_on(stack, sandbox):
    keys = keys_on_every_partition(stack.settings.partitions, per=2)
    for key in keys:
        stack.submit(key, ARGS, "sandbox")
    for key in keys:
        stack.await_key(key, {ev.ReceiptStatus.ACCEPTED})
    os.kill(stack.processor.pid, signal.SIGSTOP)  # no answers: every claim waits
    try:
        first = connector(stack, sandbox)
        wait_until(lambda: len([e for e in attempt_events(stack)
                                if isinstance(e, ev.AttemptClaim)]) >= len(keys),
                   60, "a claim per key")
        second = connector(stack, sandbox)  # a peer joins: some partitions move to it
        wait_until(lambda: "partitions revoked" in first.tail(200), 60, "a revocation")
    finally:
        os.kill(stack.processor.pid, signal.SIGCONT)
    for key in keys:
        receipt = stack.await_key(key, SUCCEEDED, timeout_s=90)
        (effect,) = sandbox.effects(key)
        assert receipt.external_id == effect["id"]
    withdrawn = [e for e in attempt_events(stack) if isinstance(e, ev.AttemptOutcome)
                 and e.status is ev.OutcomeStatus.NOT_CALLED and "withdrawn" in e.error]
    assert withdrawn, "the claims waiting on the revoked partitions were not given up"
    assert first.alive() and second.alive()
    alerts = read_topic(stack.bootstrap, stack.settings.topic("alerts"))
    assert not [a for a in alerts if a.kind is ev.AlertKind.RECONCILIATION_REQUIRED]


def test_a_refused_produce_stops_the_connector_without_committing(stack, sandbox):
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})

    def max_bytes(value: str) -> None:
        entry = ConfigEntry("max.message.bytes", value,
                            incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, stack.settings.topic("attempts"),
                                  incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result()

    # A claim for this long key is larger than the limit set below, the processor's small
    # Tick records on the same topic are not: the broker refuses the connector's produces only.
    key = f"acme/refund/{'x' * 900}"  # the sandbox takes keys up to 1024
    stack.submit(key, ARGS, "sandbox")
    stack.await_key(key, {ev.ReceiptStatus.ACCEPTED})
    max_bytes("1024")
    doomed = connector(stack, sandbox)
    assert doomed.popen.wait(60) == 3, doomed.tail()
    assert "stopping without committing" in doomed.tail()
    assert committed(stack, group_of(stack)) == {}, "an offset was committed after a refusal"
    max_bytes("1048588")
    connector(stack, sandbox)
    receipt = stack.await_key(key, SUCCEEDED, timeout_s=90)
    (effect,) = sandbox.effects(key)
    assert receipt.external_id == effect["id"]


@pytest.fixture
def unpregranted_stack(ledger_topics, tmp_path):
    """A stack whose processor does not pre-grant: a dispatch read as backlog (its connector
    started after it) is claimed plainly, and within a pre-grant that claim is Held until the
    pre-grant ends and claimed again, which is no effect of lag."""
    s = Stack(ledger_topics, tmp_path, processor_env={"LEDGER_PREGRANT_LEASE_MS": "0"})
    try:
        yield s
    finally:
        s.close()


def test_processor_lag_never_mints_a_second_claim_or_reaches_an_operator(unpregranted_stack,
                                                                          sandbox):
    stack = unpregranted_stack
    key = keys_on_every_partition(stack.settings.partitions)[0]
    stack.submit(key, ARGS, "sandbox")
    stack.await_key(key, {ev.ReceiptStatus.ACCEPTED})
    os.kill(stack.processor.pid, signal.SIGSTOP)
    try:
        connector(stack, sandbox)
        wait_until(lambda: any(isinstance(e, ev.AttemptClaim) for e in attempt_events(stack)),
                   60, "the claim")
        time.sleep(12)  # the fault itself: 12 s of lag, past the old 10 s answer timeout
    finally:
        os.kill(stack.processor.pid, signal.SIGCONT)
    receipt = stack.await_key(key, SUCCEEDED, timeout_s=90)
    assert len(sandbox.effects(key)) == 1
    claims = [e for e in attempt_events(stack) if isinstance(e, ev.AttemptClaim)
              and e.attempt == 1]
    assert len(claims) == 1, "the lag made the connector claim attempt 1 again"
    statuses = {r.key_status for r in stack.receipts(key)}
    assert ev.ReceiptStatus.NEEDS_RECONCILIATION not in statuses
    assert receipt.reason is not ev.Reason.MAX_ATTEMPTS


def test_a_new_group_reading_settled_dispatches_never_calls_again(stack, sandbox):
    keys = keys_on_every_partition(stack.settings.partitions)
    first = connector(stack, sandbox, "--deduplicates", "--fast-path")
    for key in keys:
        stack.submit(key, ARGS, "sandbox")
    for key in keys:
        stack.await_key(key, SUCCEEDED)
    calls_before = len(sandbox.ledger()["requests"])
    assert first.stop() == 0
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    for future in admin.delete_consumer_groups([group_of(stack)]).values():
        future.result()  # the next connector reads the whole dispatch topic again
    connector(stack, sandbox, "--deduplicates", "--fast-path")
    ends = {p: o for p, o in _end_offsets(stack).items() if o > 0}
    wait_until(lambda: all(committed(stack, group_of(stack)).get(p, -1) >= o
                           for p, o in ends.items()), 90, "the replay to be read")
    assert len(sandbox.ledger()["requests"]) == calls_before, "a settled dispatch was sent again"


def _end_offsets(stack: Stack) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "ends"})
    try:
        topic = stack.settings.topic("dispatch")
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(stack.settings.partitions)}
    finally:
        consumer.close()
