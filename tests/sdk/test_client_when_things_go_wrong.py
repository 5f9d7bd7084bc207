"""What a client promises when things go wrong around a submit (no broker: fakes of the
admin client, the producer and the receipts consumer). Each case was found by a hostile
review on 2026-12-05 and failed on the code before it: the receipts thread survives a schema
registry outage; a submit returns within its wait however slow Kafka is; async submit gives
up the documented way and leaves nothing behind when cancelled; close is idempotent and a
closed client refuses; a leaderless partition fails only its own end offset; an intent the
processor would dead-letter is refused before it is produced."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ledger_stream import AsyncLedgerClient, LedgerClient
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.end_offsets import EndOffsets
from ledger_stream.kafka.exceptions import DeliveryFailed
from ledger_stream.sdk import receipt_hub
from ledger_stream.sdk.errors import InvalidIntentError, LedgerUnavailable
from ledger_stream.sdk.receipt_hub import ReceiptHub
from ledger_stream.serde import AvroCodec
from ledger_stream.serde.exceptions import SchemaRegistryUnavailable
from tests.sdk.fake_consumer import FakeConsumer, message, receipt

pytestmark = pytest.mark.timeout(30)
TOPIC, KEY = "ledger.receipts", "acme/refund/inv-1"
WF = ev.Workflow(graph="g", version="1", thread_id="t", node="n")


class Admin:
    """One partition (or ``n``); offsets fail for ``failing_s``; ``bad`` partitions always."""

    def __init__(self, failing_s: float = 0.0, n: int = 1, bad: frozenset[int] = frozenset(),
                 topics_error: bool = False) -> None:
        self.until, self.n, self.bad, self.topics_error = time.monotonic() + failing_s, n, bad, \
            topics_error

    def list_topics(self, topic: str, timeout: float) -> Any:
        if self.topics_error:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
        return SimpleNamespace(topics={topic: SimpleNamespace(
            error=None, partitions={p: SimpleNamespace(leader=1) for p in range(self.n)})})

    def list_offsets(self, wanted: dict[Any, Any], **_: Any) -> dict[Any, Any]:
        if time.monotonic() < self.until:
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "election"))

        def future(p: int) -> Any:
            def result() -> Any:
                if p in self.bad:
                    raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE, "no lead"))
                return SimpleNamespace(offset=5)
            return SimpleNamespace(result=result)
        return {tp: future(tp.partition) for tp in wanted}


class Producer:
    """Records what was produced; ``block_s``: how long an unacknowledged send blocks."""

    def __init__(self, block_s: float = 0.0) -> None:
        self.sent: list[ev.Intent] = []
        self.block_s = block_s

    def deliver(self, role: str, event: Any, headers: Any = (), timeout_s: float = 30.0) -> None:
        if self.block_s:
            time.sleep(min(timeout_s, self.block_s))  # the real one waits timeout_s (30 s)
            raise DeliveryFailed(f"not acknowledged after {timeout_s:g} s")
        self.sent.append(event)

    def close(self, timeout_s: float = 30.0) -> None:
        pass


def make(monkeypatch: pytest.MonkeyPatch, admin: Admin, cls: type = LedgerClient) -> Any:
    FakeConsumer.instances.clear()
    monkeypatch.setattr(receipt_hub, "Consumer", FakeConsumer)
    client = cls(Settings(kafka_bootstrap="127.0.0.1:1"))
    sync = client.client if cls is AsyncLedgerClient else client
    monkeypatch.setattr(sync, "_admin", lambda: admin)
    return client


def intent(client: Any) -> ev.Intent:
    return client.intent(KEY, "refund", "payments", {"amount": 1}, workflow=WF)


def test_hub_thread_survives_a_schema_registry_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeConsumer.instances.clear()
    monkeypatch.setattr(receipt_hub, "Consumer", FakeConsumer)

    class Codec(AvroCodec):
        down = True

        def decode(self, data: Any, expect: Any = ()) -> Any:
            if Codec.down:
                Codec.down = False
                raise SchemaRegistryUnavailable("registry: connection refused")
            return super().decode(data, expect)

    codec = Codec()
    hub = ReceiptHub("127.0.0.1:1", TOPIC, codec, lambda key: 0, lambda p, patience_s: 7)
    try:
        waiter = hub.follow(KEY)
        consumer = FakeConsumer.instances[0]
        consumer.records.put(message(KEY, codec.encode(receipt("i1"))))  # registry down
        time.sleep(0.3)
        consumer.records.put(message(KEY, codec.encode(receipt("i2"))))  # registry back
        got: list[str] = []
        while len(got) < 2 and (more := waiter.read(3)):
            got += [r.intent_event_id for r in more]
        assert got == ["i1", "i2"]  # the thread lives, and the record it could not decode
        # then is retried, not skipped
    finally:
        hub.close()


def test_submit_returns_within_its_wait_when_the_ack_is_slow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(monkeypatch, Admin())
    client._producer = Producer(block_s=4.0)
    try:
        began = time.monotonic()
        with pytest.raises((LedgerUnavailable, TimeoutError)):
            client.submit(intent(client), wait=0.5)
        assert time.monotonic() - began < 3.0  # not the 4 s of the ack (real: 30 s)
    finally:
        client.close()


def test_submit_returns_within_its_wait_through_an_election(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(monkeypatch, Admin(failing_s=3.0))
    client._producer = Producer()
    try:
        began = time.monotonic()
        with pytest.raises((LedgerUnavailable, TimeoutError)):
            client.submit(intent(client), wait=0.5)
        assert time.monotonic() - began < 1.5  # was up to 15 s + 5 s
    finally:
        client.close()


def test_async_submit_gives_up_with_ledger_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(monkeypatch, Admin(topics_error=True), AsyncLedgerClient)
    try:
        with pytest.raises(LedgerUnavailable):
            client.client.submit(intent(client), wait=0.5)
        with pytest.raises(LedgerUnavailable):
            asyncio.run(client.submit(intent(client), wait=0.5))
    finally:
        client.client.close()


def test_a_cancelled_async_submit_leaves_no_waiter(monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(monkeypatch, Admin(failing_s=1.0), AsyncLedgerClient)
    client.client._producer = Producer()

    async def main() -> None:
        task = asyncio.create_task(client.submit(intent(client), wait=5))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(1.5)  # the worker thread finishes registering

    try:
        asyncio.run(main())
        assert client.client._hub._waiters == {}
    finally:
        client.client.close()


def test_close_is_idempotent_and_a_closed_client_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(monkeypatch, Admin())
    client.close()
    client.close()


def test_submit_after_close_starts_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(monkeypatch, Admin())
    client.receipts()
    client.close()
    with pytest.raises(Exception) as raised:
        client.submit(intent(client), wait=0.2)
    alive = [t for t in threading.enumerate() if t.name == "ledger-receipts"]
    assert not alive, f"new receipts thread after close ({raised.value!r})"
    assert not isinstance(raised.value, AttributeError)


def test_a_leaderless_partition_does_not_fail_another_partitions_end() -> None:
    ends = EndOffsets(Admin(n=3, bad=frozenset({2})), TOPIC, 3)  # type: ignore[arg-type]
    assert ends.get(0, patience_s=0.3) == 5


def test_submit_refuses_an_invalid_intent_before_producing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = make(monkeypatch, Admin())
    producer = client._producer = Producer()
    try:
        bad = dataclasses.replace(intent(client), args_json='{"amount":1000}')  # hash stale
        with pytest.raises(InvalidIntentError):
            client.submit(bad, wait=0.2)
    finally:
        assert producer.sent == []  # the processor dead-letters it: never answered
        client.close()


def test_an_intent_larger_than_kafka_accepts_is_invalid_not_unavailable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class TooLarge(Producer):
        def deliver(self, role: str, event: Any, headers: Any = (),
                    timeout_s: float = 30.0) -> None:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"))

    client = make(monkeypatch, Admin())
    client._producer = TooLarge()
    try:  # LedgerUnavailable says "submitting it again is safe": no retry would ever help
        with pytest.raises(InvalidIntentError, match="larger than Kafka accepts"):
            client.submit(intent(client), wait=0.5)
    finally:
        client.close()


def test_kafka_waits_inside_a_submit_stay_within_their_own_limits() -> None:
    # A 300 s wait must not hold a partition's first end-offset lookup (and the receipts'
    # assignment lock) for 300 s; a wait already over still gives Kafka half a second.
    from ledger_stream.sdk.client import (
        END_OFFSET_WAIT_MAX_S,
        KAFKA_WAIT_FLOOR_S,
        _kafka_wait,
    )

    assert _kafka_wait(time.monotonic() + 300, END_OFFSET_WAIT_MAX_S) == END_OFFSET_WAIT_MAX_S
    assert _kafka_wait(time.monotonic() - 1, END_OFFSET_WAIT_MAX_S) == KAFKA_WAIT_FLOOR_S
    assert 1.0 < _kafka_wait(time.monotonic() + 2, END_OFFSET_WAIT_MAX_S) <= 2.0
