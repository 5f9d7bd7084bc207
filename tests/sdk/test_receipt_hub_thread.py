"""The receipts thread of ``ReceiptHub`` against a fake consumer (no broker): what the
thread does when the cluster or a waiter misbehaves. Found by a hostile review of the
first-submit change: a partition without a leader held up every new client's first
receipt for the whole leader-learning wait, and a waiter whose event loop was closed
ended the thread, so every later submit of the client timed out."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ledger_stream.domain.events import ReceiptStatus
from ledger_stream.sdk import receipt_hub
from ledger_stream.sdk.receipt_hub import ReceiptHub
from ledger_stream.serde import AvroCodec
from tests.sdk.fake_consumer import KEY, FakeConsumer, message, receipt

TOPIC = "t.receipts"








@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Any:
    FakeConsumer.instances.clear()
    monkeypatch.setattr(receipt_hub, "Consumer", FakeConsumer)
    monkeypatch.setattr(receipt_hub, "LEARN_S", 30.0)  # never given up on by itself
    made = ReceiptHub("127.0.0.1:1", TOPIC, AvroCodec(), lambda key: 0, lambda p, patience_s: 7)
    yield made
    made.close()


def test_a_partition_is_assigned_at_once_though_the_leaders_are_unknown(hub: Any) -> None:
    consumer = FakeConsumer.instances[0]
    assert consumer.learning.wait(5)  # the thread is trying to learn the leaders
    asked = time.monotonic()
    hub.follow(KEY)
    deadline = time.monotonic() + 5
    while not consumer.assigned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert consumer.assigned, "the partition was never assigned"
    at, tps = consumer.assigned[0]
    assert at - asked < 3.0  # not after the 30 s of learning (slack for a busy machine)
    assert [(tp.topic, tp.partition, tp.offset) for tp in tps] == [(TOPIC, 0, 7)]


def test_a_failed_assignment_is_tried_again(hub: Any) -> None:
    consumer = FakeConsumer.instances[0]
    consumer.fail_assign = 1
    hub.follow(KEY)
    deadline = time.monotonic() + 5
    while not consumer.assigned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [tp.partition for _, tps in consumer.assigned for tp in tps] == [0]


def test_a_waiter_whose_event_loop_closed_does_not_stop_the_others(hub: Any) -> None:
    codec = AvroCodec()
    loop = asyncio.new_event_loop()
    gone = hub.follow_async(KEY, loop)
    loop.close()
    alive = hub.follow(KEY)
    consumer = FakeConsumer.instances[0]
    first, second = receipt("i1"), receipt("i2")
    consumer.records.put(message(KEY, codec.encode(first)))
    assert [r.intent_event_id for r in alive.read(5)] == ["i1"]
    consumer.records.put(message(KEY, codec.encode(second)))
    assert [r.intent_event_id for r in alive.read(5)] == ["i2"]  # the thread still reads
    assert gone.read(0) == []


def test_delivering_to_a_waiter_whose_loop_closed_forgets_it(hub: Any) -> None:
    loop = asyncio.new_event_loop()
    gone = hub.follow_async(KEY, loop)
    loop.close()
    gone.deliver(receipt("i1"))  # does not raise into the thread
    assert KEY.encode() not in hub._waiters


class FlakyAdmin:
    """An admin client in a leader election: offset lookups fail for ``failing_s``."""

    def __init__(self, failing_s: float) -> None:
        self.until = time.monotonic() + failing_s

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(
            error=None, partitions={0: SimpleNamespace(leader=1)})})

    def list_offsets(self, wanted: dict[Any, Any], **_: Any) -> dict[Any, Any]:
        if time.monotonic() < self.until:
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "election"))
        done = SimpleNamespace(result=lambda: SimpleNamespace(offset=5))
        return {tp: done for tp in wanted}


def test_a_status_is_not_held_up_by_a_submits_retries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A submit's subscription leads an end-offset request through a 1.5 s election (it
    rides it out: 15 s of patience); a status(wait=0.5) asked meanwhile gives up within
    its own wait instead of waiting for the submit's request (one EndOffsets each)."""
    from ledger_stream import LedgerClient
    from ledger_stream.config import Settings
    from ledger_stream.sdk.errors import LedgerUnavailable

    FakeConsumer.instances.clear()
    monkeypatch.setattr(receipt_hub, "Consumer", FakeConsumer)
    client = LedgerClient(Settings(kafka_bootstrap="127.0.0.1:1",
                                   view_url="http://127.0.0.1:1"))
    admin = FlakyAdmin(1.5)
    monkeypatch.setattr(client, "_admin", lambda: admin)
    try:
        following = threading.Thread(target=lambda: client.receipts().follow(KEY))
        following.start()
        time.sleep(0.1)  # the submit's request is under way
        asked = time.monotonic()
        with pytest.raises(LedgerUnavailable):
            client.status(KEY, wait=0.5)
        assert time.monotonic() - asked < 1.2  # not after the election (1.5 s)
        following.join(10)
        consumer = FakeConsumer.instances[0]
        deadline = time.monotonic() + 5
        while not consumer.assigned and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [tp.offset for _, tps in consumer.assigned for tp in tps] == [5]
    finally:
        client.close()


def test_a_waiter_takes_no_receipt_the_log_held_before_it_was_registered(hub: Any) -> None:
    # A thread behind the log (a drain of old records being handed over) used to give a
    # resubmitted intent its own older receipt, from before the key changed.
    consumer = FakeConsumer.instances[0]
    codec = AvroCodec()
    first = hub.follow(KEY)
    consumer.high = 12  # the consumer has fetched up to offset 11
    consumer.records.put(message(KEY, codec.encode(receipt("i1")), offset=7))
    assert [r.intent_event_id for r in first.read(5)] == ["i1"]
    first.close()

    again = hub.follow(KEY)  # registered: every record below 12 was written before it
    assert again.floor == 12
    consumer.records.put(message(KEY, codec.encode(receipt("i1-old")), offset=11))
    consumer.records.put(message(KEY, codec.encode(receipt("i1-new")), offset=12))
    assert [r.intent_event_id for r in again.read(5)] == ["i1-new"]


def _hand_over(consumer: FakeConsumer, intent_id: str, offset: int, end: int) -> None:
    """A receipt of KEY at ``offset``, fetched with the log ending at ``end``."""
    consumer.high = end
    consumer.records.put(message(KEY, AvroCodec().encode(receipt(intent_id)), offset=offset))


def test_a_log_that_ends_lower_lowers_the_floor(hub: Any) -> None:
    # A truncated log (an unclean leader election) or a recreated topic: a floor kept at the
    # old end would hide every receipt until the offsets climbed back past it.
    consumer = FakeConsumer.instances[0]
    first = hub.follow(KEY)
    _hand_over(consumer, "i1", offset=999, end=1000)
    assert len(first.read(5)) == 1
    _hand_over(consumer, "i2", offset=4, end=5)
    assert len(first.read(5)) == 1
    again = hub.follow(KEY)
    assert again.floor == 5
    _hand_over(consumer, "i3", offset=5, end=6)
    assert [r.intent_event_id for r in again.read(5)] == ["i3"]


def test_a_floor_from_before_the_log_ended_lower_holds_nothing_back(hub: Any) -> None:
    # Registered between the truncation and the next drain of its partition: its floor is
    # the old end; the drain that brings its receipt notes the lower end first.
    consumer = FakeConsumer.instances[0]
    first = hub.follow(KEY)
    _hand_over(consumer, "i1", offset=999, end=1000)
    assert len(first.read(5)) == 1
    first.close()
    late = hub.follow(KEY)
    assert late.floor == 1000
    _hand_over(consumer, "i2", offset=4, end=5)
    assert [r.intent_event_id for r in late.read(5)] == ["i2"]


def _pending(intent_id: str, status: ReceiptStatus) -> Any:
    return replace(receipt(intent_id), status=status, key_status=status)


def test_a_submit_wakes_for_its_answer_not_for_each_pending_receipt(hub: Any) -> None:
    waiter = hub.follow(KEY)
    got: list[Any] = []
    returned = threading.Event()
    woken = []  # each notify wakes the submit's thread, whatever it then finds
    notify = waiter._cond.notify
    waiter._cond.notify = lambda *a: (woken.append(1), notify(*a))

    def wait() -> None:
        got.extend(waiter.read_settled(30))
        returned.set()

    threading.Thread(target=wait, daemon=True).start()
    time.sleep(0.05)  # waiting by now (if not, it takes the pending ones at once: no wake)
    waiter.deliver(_pending("i1", ReceiptStatus.ACCEPTED))
    waiter.deliver(_pending("i1", ReceiptStatus.IN_PROGRESS))
    assert not returned.wait(0.3)
    assert woken == [], "a pending receipt woke the submit"
    waiter.deliver(receipt("i1"))
    assert returned.wait(5)
    assert [r.status for r in got] == [ReceiptStatus.ACCEPTED, ReceiptStatus.IN_PROGRESS,
                                       ReceiptStatus.SUCCEEDED]  # every one, in order


def test_a_submit_whose_wait_runs_out_gets_the_pending_receipts(hub: Any) -> None:
    waiter = hub.follow(KEY)
    waiter.deliver(_pending("i1", ReceiptStatus.ACCEPTED))
    began = time.monotonic()
    assert [r.status for r in waiter.read_settled(0.2)] == [ReceiptStatus.ACCEPTED]
    assert time.monotonic() - began >= 0.19
    assert waiter.read_settled(0) == []  # taken once


def test_a_settled_receipt_followed_by_a_pending_one_still_wakes_the_submit(hub: Any
                                                                          ) -> None:
    # Both arrive before the submit's thread reads: the pending one after the settled one
    # must not hide it (the submit would sleep out its whole wait with its answer queued).
    waiter = hub.follow(KEY)
    waiter.deliver(receipt("i1"))
    waiter.deliver(_pending("i2", ReceiptStatus.ACCEPTED))
    began = time.monotonic()
    got = waiter.read_settled(5)
    assert time.monotonic() - began < 1.0
    assert [r.status for r in got] == [ReceiptStatus.SUCCEEDED, ReceiptStatus.ACCEPTED]
