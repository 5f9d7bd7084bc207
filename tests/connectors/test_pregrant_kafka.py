"""The pre-granted first attempt on the real broker, the real processor (exactly once, so it
pre-grants) and the payments sandbox, declared not deduplicating: a fresh dispatch is fenced
(its offset committed in the connector group's generation), claimed with ``fenced`` and
called once, without a Grant in between; a second connector joining the group while
dispatches flow never calls one of them again. Effects and calls are read from the
sandbox's own ledger (every request it received), not from the ledger's events."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.connector.feed import DispatchFeed
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.reader import read_topic, tail_topic
from ledger_stream.serde import AvroCodec
from tests.connectors.waits import wait_until

pytestmark = pytest.mark.timeout(300)

ARGS = {"amount": 700, "currency": "EUR", "to": "cust-3"}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}


def connector(stack: Stack, sandbox: SandboxProc):
    # No --deduplicates: a second call would be a second payment.
    return stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url)


def new_key(partition: int, partitions: int) -> str:
    while True:
        key = f"acme/refund/{uuid.uuid4().hex[:10]}"
        if partition_for(key, partitions) == partition:
            return key


def attempt_events(stack: Stack) -> list:
    return [e for e in read_topic(stack.bootstrap, stack.settings.topic("attempts"))
            if not isinstance(e, ev.Tick)]


def dispatch_offsets(stack: Stack) -> dict[str, tuple[int, int, ev.Dispatch]]:
    """key -> (partition, offset, Dispatch) of each key's first Dispatch record."""
    codec, found = AvroCodec(), {}
    for partition, offset, value in tail_topic(stack.bootstrap,
                                               stack.settings.topic("dispatch"), follow=False):
        event = codec.decode(value) if value is not None else None
        if isinstance(event, ev.Dispatch) and event.key not in found:
            found[event.key] = (partition, offset, event)
    return found


def committed(stack: Stack) -> dict[int, int]:
    group = f"{stack.settings.topic_prefix}.connector.sandbox"
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(stack.settings.topic("dispatch"), p)
               for p in range(stack.settings.partitions)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    finally:
        consumer.close()


def owns_some(conn) -> bool:
    """Whether the connector was assigned a partition (its log's JSON lines say so)."""
    lines = [json.loads(line) for line in conn.tail(400).splitlines()
             if line.startswith("{")]
    return any(e.get("msg") == "partitions assigned" and e.get("partitions") for e in lines)


def requests_of(sandbox: SandboxProc, key: str) -> list[dict]:
    return [r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key]


class Fencing:
    """A connector's dispatch feed whose consumer leaves the group after 6 s without a
    poll (the shortest interval the broker allows as a session), and its fences' answers."""

    def __init__(self, settings: Settings, group: str, owned: set[int]) -> None:
        assert settings.kafka_bootstrap
        self.answers: dict[tuple[int, int], bool] = {}

        def make(config: dict[str, object]) -> Consumer:
            return Consumer({**config, "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 6000})

        self.feed = DispatchFeed(settings.kafka_bootstrap, settings.topic("dispatch"), group,
                                 AvroCodec(), 6000, owned.update, owned.difference_update,
                                 make, lambda p, o, ok: self.answers.update({(p, o): ok}))

    def poll(self, timeout_s: float) -> list:
        return self.feed.poll(timeout_s)

    def fence(self, partition: int, offset: int) -> bool:
        """Ask the fence and poll until it is answered (asynchronous: ``on_commit``)."""
        if not self.feed.fence(partition, offset):
            return False
        wait_until(lambda: (self.feed.poll(0.1), (partition, offset) in self.answers)[1],
                   30, "the fence's answer")
        return self.answers.pop((partition, offset))


def test_only_the_partitions_current_owner_can_fence(ledger_topics: Settings):
    """The fence's ground: the group coordinator takes a commit only from a member of its
    current generation. Read back from the broker's committed offsets."""
    group = f"{ledger_topics.topic_prefix}.fence"
    partitions = set(range(ledger_topics.partitions))
    a_owns: set[int] = set()
    b_owns: set[int] = set()
    a = Fencing(ledger_topics, group, a_owns)
    b = None
    try:
        wait_until(lambda: a.poll(0.1) == [] and a_owns == partitions, 60, "a's assignment")
        assert a.fence(0, 5)
        b = Fencing(ledger_topics, group, b_owns)
        wait_until(lambda: (a.poll(0.1), b.poll(0.1)) and b_owns
                   and a_owns | b_owns == partitions and not a_owns & b_owns, 60,
                   "the cooperative rebalance")
        moved = min(b_owns)
        assert not a.fence(moved, 7)  # no longer assigned to a
        assert b.fence(moved, 7)
        # a stops polling: past max.poll.interval.ms it leaves the group, and b takes every
        # partition; a has not been told (its revocation runs in its next poll).
        kept = min(a_owns)
        wait_until(lambda: b.poll(0.1) == [] and b_owns == partitions, 60,
                   "a's partitions moving to b")
        assert kept in a_owns  # a still believes it owns it
        assert b.fence(kept, 3)
        # The coordinator refuses a member it removed (polled for the answer, a rejoins).
        assert not a.fence(kept, 9)
        offsets = {tp.partition: tp.offset for tp in b.feed._consumer.committed(
            [TopicPartition(ledger_topics.topic("dispatch"), p) for p in (0, moved, kept)],
            timeout=10)}
        assert offsets[kept] == 3 and offsets[moved] == 7
    finally:
        a.feed.close()
        if b is not None:
            b.feed.close()


def test_a_pregranted_dispatch_is_fenced_and_called_once_on_its_fenced_claim(
        pregrant_stack: Stack, sandbox: SandboxProc):
    stack = pregrant_stack
    conn = connector(stack, sandbox)
    wait_until(lambda: "partitions assigned" in conn.tail(200), 60, "the assignment")
    key = new_key(1, stack.settings.partitions)
    stack.submit(key, ARGS, "sandbox")
    receipt = stack.await_key(key, SUCCEEDED, timeout_s=60)

    (request,) = requests_of(sandbox, key)  # called once
    (effect,) = sandbox.effects(key)
    assert receipt.external_id == effect["id"]
    partition, offset, dispatch = dispatch_offsets(stack)[key]
    assert dispatch.lease_until_ms > 0  # the processor pre-granted attempt 1
    claims = [e for e in attempt_events(stack) if isinstance(e, ev.AttemptClaim)
              and e.key == key]
    assert [c.fenced for c in claims] == [True]  # no plain claim, no claim again
    assert request["attempt_id"] == claims[0].claim_id  # the call was the fenced claim's
    assert committed(stack)[partition] > offset  # the fence: committed past the dispatch
    assert conn.alive()


def test_a_connector_joining_mid_run_never_calls_a_pregranted_dispatch_again(
        short_pregrant_stack: Stack, sandbox: SandboxProc):
    stack = short_pregrant_stack
    partitions = stack.settings.partitions
    first = connector(stack, sandbox)
    wait_until(lambda: owns_some(first), 60, "the assignment")
    keys: list[str] = []

    def submit_round() -> None:
        for p in range(partitions):
            keys.append(new_key(p, partitions))
            stack.submit(keys[-1], ARGS, "sandbox")
            time.sleep(0.05)

    def await_all() -> None:
        for key in keys:
            stack.await_key(key, SUCCEEDED, timeout_s=90)

    submit_round()
    await_all()  # the processor is up and pre-granting
    second = connector(stack, sandbox)  # joins the group: some partitions move to it
    deadline = time.monotonic() + 90
    while not owns_some(second) and time.monotonic() < deadline:
        submit_round()  # dispatches flow through the rebalance
    assert owns_some(second), second.tail(40)
    for _ in range(4):
        submit_round()
        time.sleep(0.3)
    await_all()
    for _ in range(2):  # every frontier is free again: both members fence
        submit_round()
    await_all()

    ledger = sandbox.ledger()
    calls: dict[str, int] = {}
    for r in ledger["requests"]:
        calls[r["idempotency_key"]] = calls.get(r["idempotency_key"], 0) + 1
    assert {k: calls.get(k, 0) for k in keys} == dict.fromkeys(keys, 1)
    assert sorted(e["idempotency_key"] for e in ledger["effects"]) == sorted(keys)
    assert "partitions revoked" in first.tail(400)
    fenced = [e for e in attempt_events(stack) if isinstance(e, ev.AttemptClaim) and e.fenced]
    # Both members took pre-grants: the rebalance ran through the pre-granted path.
    assert len({c.connector for c in fenced}) == 2, {c.connector for c in fenced}
    assert first.alive() and second.alive()
    alerts = read_topic(stack.bootstrap, stack.settings.topic("alerts"))
    assert not [a for a in alerts if a.kind is ev.AlertKind.RECONCILIATION_REQUIRED]
