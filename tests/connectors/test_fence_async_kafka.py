"""On the real broker, the real processor (exactly once, pre-granting) and the payments
sandbox: while a fence is outstanding (its commit's answer not served yet) the connector's
loop goes on serving every other key, and the fenced key is called once, when its answer
comes. The connector runs in this process with a real consumer whose ``on_commit`` answers
for one partition are held back until the test lets them through (a coordinator slow to
answer, made deterministic). Calls are read from the sandbox's own ledger."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from connectors.http import HttpTarget
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.connector.runtime import ConnectorWorker
from ledger_stream.domain import events as ev
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.reader import read_topic

pytestmark = pytest.mark.timeout(240)

ARGS = {"amount": 700, "currency": "EUR", "to": "cust-3"}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}
Answer = tuple[KafkaError | None, list[TopicPartition]]


class SlowAnswers(Consumer):
    """A real consumer whose commit answers naming ``partition`` wait (in ``held``) until
    ``release``; then the next poll serves them, in order, before anything else."""

    def __init__(self, config: dict[str, Any], partition: int) -> None:
        self._on_commit: Callable[[KafkaError | None, list[TopicPartition]], None] = \
            config["on_commit"]
        self.partition, self.held = partition, []  # type: list[Answer]
        self.released = threading.Event()
        super().__init__({**config, "on_commit": self._answer})

    def _answer(self, err: KafkaError | None, tps: list[TopicPartition]) -> None:
        if not self.released.is_set() and any(tp.partition == self.partition for tp in tps):
            self.held.append((err, tps))
            return
        self._on_commit(err, tps)

    def poll(self, *args: Any, **kwargs: Any) -> Any:
        while self.released.is_set() and self.held:
            self._on_commit(*self.held.pop(0))
        return super().poll(*args, **kwargs)


def key_on(partition: int, partitions: int) -> str:
    while True:
        key = f"acme/refund/{uuid.uuid4().hex[:10]}"
        if partition_for(key, partitions) == partition:
            return key


def wait_until(predicate: Callable[[], Any], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_the_loop_serves_another_key_while_a_fence_waits_for_its_answer(
        pregrant_stack: Stack, sandbox: SandboxProc):
    stack = pregrant_stack
    partitions = stack.settings.partitions
    made: list[SlowAnswers] = []

    def consumer(config: dict[str, Any]) -> SlowAnswers:
        made.append(SlowAnswers(config, partition=0))
        return made[0]

    # No deduplicates: a second call would be a second payment.
    worker = ConnectorWorker(stack.settings, stack.bootstrap,
                             HttpTarget("sandbox", sandbox.url), ConnectorOptions(),
                             consumer=consumer)
    stop = threading.Event()
    loop = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    loop.start()
    try:
        slow = made[0]
        wait_until(lambda: len(slow.assignment()) == partitions, "the assignment")

        def calls(key: str) -> int:
            return len([r for r in sandbox.ledger()["requests"]
                        if r["idempotency_key"] == key])

        a, b = key_on(0, partitions), key_on(1, partitions)
        stack.submit(a, ARGS, "sandbox")
        wait_until(lambda: slow.held, "a's fence landing, its answer held back")
        stack.submit(b, ARGS, "sandbox")
        stack.await_key(b, SUCCEEDED, timeout_s=60)  # served meanwhile, fenced and called
        assert calls(b) == 1
        assert calls(a) == 0 and slow.held  # a's fence still waits for its answer
        slow.released.set()
        stack.await_key(a, SUCCEEDED, timeout_s=60)
        assert calls(a) == 1 and calls(b) == 1
        claims = [e for e in read_topic(stack.bootstrap, stack.settings.topic("attempts"))
                  if isinstance(e, ev.AttemptClaim) and e.key in (a, b)]
        assert sorted((c.key, c.fenced) for c in claims) == sorted([(a, True), (b, True)])
        (request,) = [r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == a]
        assert request["attempt_id"] == next(c.claim_id for c in claims if c.key == a)
    finally:
        stop.set()
        loop.join(60)
    assert not loop.is_alive() and worker.exit_status == 0
