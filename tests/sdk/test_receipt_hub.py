"""The client's one receipts subscription, against the real broker: receipts reach every
waiter of their key and no other, from the moment the waiter was registered, and a client
reads with one consumer however many submits it makes."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from ledger_stream import LedgerClient, operation_key
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(90)


def receipt(key: str, intent_id: str, status: ev.ReceiptStatus) -> ev.Receipt:
    return ev.Receipt(receipt_id=uuid.uuid4().hex, key=key, intent_event_id=intent_id,
                      status=status, reason=ev.Reason.NONE, args_hash="h", attempts=1,
                      at_ms=1, key_status=status)


def keys_in_one_partition(partitions: int, n: int) -> list[str]:
    """``n`` keys that share a partition (so one assignment serves them all)."""
    by_partition: dict[int, list[str]] = {}
    while True:
        k = operation_key("acme", "refund", uuid.uuid4().hex[:10])
        group = by_partition.setdefault(partition_for(k, partitions), [])
        group.append(k)
        if len(group) == n:
            return group


def test_receipts_reach_every_waiter_of_their_key_and_no_other(ledger_topics: Settings):
    a, b = keys_in_one_partition(ledger_topics.partitions, 2)
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    old = receipt(a, "before", ev.ReceiptStatus.SUCCEEDED)
    producer.send("receipts", old)
    producer.flush()
    with LedgerClient(ledger_topics) as client:
        hub = client.receipts()
        first, second, other = hub.follow(a), hub.follow(a), hub.follow(b)
        new = receipt(a, "i1", ev.ReceiptStatus.ACCEPTED)
        producer.send("receipts", new)
        producer.flush()
        assert first.read(20) == [new]
        assert second.read(20) == [new]
        assert other.read(0.5) == []  # same partition, another key
        first.close()
        newer = receipt(a, "i1", ev.ReceiptStatus.SUCCEEDED)
        producer.send("receipts", newer)
        producer.flush()
        assert second.read(20) == [newer]  # the receipt written before it was registered
        assert first.read(0.2) == []  # never came; a closed waiter gets nothing more
        assert hub.assigned == frozenset({partition_for(a, ledger_topics.partitions)})
    producer.close()


def test_an_async_waiter_is_answered_in_its_event_loop(ledger_topics: Settings):
    (k,) = keys_in_one_partition(ledger_topics.partitions, 1)
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())

    async def scenario(client: LedgerClient) -> list[ev.Receipt]:
        waiter = client.receipts().follow_async(k, asyncio.get_running_loop())
        producer.send("receipts", receipt(k, "i1", ev.ReceiptStatus.SUCCEEDED))
        producer.flush()
        try:
            return await waiter.read_async(20)
        finally:
            waiter.close()

    with LedgerClient(ledger_topics) as client:
        got = asyncio.run(scenario(client))
    producer.close()
    assert [r.intent_event_id for r in got] == ["i1"]


def test_a_partition_is_assigned_once_for_every_key_in_it(ledger_topics: Settings):
    a, b = keys_in_one_partition(ledger_topics.partitions, 2)
    with LedgerClient(ledger_topics) as client:
        hub = client.receipts()
        hub.follow(a).close()
        hub.follow(b).close()
        assert client.receipts() is hub
        assert hub.assigned == frozenset({partition_for(a, ledger_topics.partitions)})


def test_a_second_partition_joins_one_already_read(ledger_topics: Settings):
    """The thread waits for its first assignment outside a poll, then assigns the next one
    between polls: receipts of keys in both partitions reach their waiters, and the one
    written before the second waiter was registered does not."""
    partitions = ledger_topics.partitions
    a = keys_in_one_partition(partitions, 1)[0]
    b = next(k for k in (operation_key("acme", "refund", uuid.uuid4().hex[:10])
                         for _ in iter(int, 1))
             if partition_for(k, partitions) != partition_for(a, partitions))
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    with LedgerClient(ledger_topics) as client:
        hub = client.receipts()
        first = hub.follow(a)
        to_a = receipt(a, "i1", ev.ReceiptStatus.SUCCEEDED)
        producer.send("receipts", to_a)
        producer.flush()
        assert first.read(20) == [to_a]
        early = receipt(b, "early", ev.ReceiptStatus.SUCCEEDED)
        producer.send("receipts", early)
        producer.flush()
        second = hub.follow(b)
        to_b = receipt(b, "i2", ev.ReceiptStatus.SUCCEEDED)
        producer.send("receipts", to_b)
        producer.flush()
        assert second.read(20) == [to_b]
        assert hub.assigned == {partition_for(a, partitions), partition_for(b, partitions)}
    producer.close()
