"""Restore against a real broker, where the changelog holds a transaction still open: a
previous owner's, killed or paused mid-batch and not yet aborted by the coordinator. It
holds the read-committed end of the partition back, and a later owner's committed batches
lie beyond it. A restore that stops at that end decides from rows the ledger has left (the
chaos soak: "state store ahead of its changelog", keys stuck ``accepted``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ledger_stream.config import Settings
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.offsets import end_offset
from ledger_stream.processor import clients
from ledger_stream.processor.changelog import Positions, headers
from ledger_stream.processor.restore import restore_partitions
from ledger_stream.state import MemoryPartitionStore, StoreBatch
from tests.processor.restore_support import GROUP, _states

pytestmark = pytest.mark.timeout(120)

POLICY = Policy()


def _producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": f"test-{uuid.uuid4().hex[:8]}",
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(30)
    return producer


@pytest.fixture
def changelog(ledger_topics: Settings) -> Iterator[tuple[str, str]]:
    assert ledger_topics.kafka_bootstrap
    yield ledger_topics.kafka_bootstrap, ledger_topics.topic("changelog")


def _open_then_committed(bootstrap: str, topic: str) -> tuple[Producer, bytes]:
    """Partition 0: a previous owner's transaction left open (a row no one may apply),
    then a later owner's committed batch granting key A. Returns the open one's producer
    and A's committed row."""
    reserved, granted = _states()
    previous = _producer(bootstrap)
    previous.begin_transaction()
    previous.produce(topic, b'["not', b"acme/pay/A", partition=0,
                     headers=headers(GROUP, Positions(4, 1)))
    previous.flush(10)
    later = _producer(bootstrap)
    later.begin_transaction()
    later.produce(topic, reserved, b"acme/pay/B", partition=0,
                  headers=headers(GROUP, Positions(5, 3)))
    later.produce(topic, granted, b"acme/pay/A", partition=0,
                  headers=headers(GROUP, Positions(5, 3)))
    later.commit_transaction(30)
    return previous, granted


def test_a_restore_reads_past_an_open_transaction_to_the_batches_committed_after_it(
        changelog: tuple[str, str]) -> None:
    bootstrap, topic = changelog
    previous, granted = _open_then_committed(bootstrap, topic)
    # The coordinator would abort it at its timeout; here it ends a moment into the restore.
    ender = threading.Timer(2.0, previous.abort_transaction, args=(30,))
    ender.start()
    restorer = Consumer(clients.changelog_reader_config(bootstrap))
    ends = Consumer(clients.changelog_ends_config(bootstrap))
    store = MemoryPartitionStore(0)
    try:
        stats = restore_partitions(restorer, topic, {0: store}, {0: Positions(5, 3)}, GROUP,
                                   POLICY, timeout_s=60, ends=ends)
    finally:
        ender.join()
        restorer.close()
        ends.close()

    assert store.get("acme/pay/A") == granted  # the later owner's row, not the open one's
    assert store.get("acme/pay/B") is not None
    assert (stats.applied, stats.skipped) == (2, 0)
    # The two seconds the open transaction held the end back were spent waiting for the
    # broker, and are reported so (the "partitions assigned" log line's wait seconds).
    assert 1.5 < stats.waited <= stats.seconds
    # Past both transactions (the open one's record, the commit marker): nothing is read
    # twice by the next restore, and nothing of theirs is missed.
    assert store.changelog_offset >= 4


def test_a_store_written_past_an_open_transaction_is_not_taken_as_ahead_of_its_changelog(
        changelog: tuple[str, str]) -> None:
    """The later owner wrote its store after its commit (step d), past the previous owner's
    open transaction: its next restore must neither read the changelog again from 0 nor
    move the store back."""
    bootstrap, topic = changelog
    previous, granted = _open_then_committed(bootstrap, topic)
    restorer = Consumer(clients.changelog_reader_config(bootstrap))
    ends = Consumer(clients.changelog_ends_config(bootstrap))
    try:
        end = end_offset(ends, TopicPartition(topic, 0))
        store = MemoryPartitionStore(0)
        store.write(StoreBatch({"acme/pay/A": granted}, (), (), 2_000, end))
        stats = restore_partitions(restorer, topic, {0: store}, {0: Positions(5, 3)}, GROUP,
                                   POLICY, timeout_s=60, ends=ends)
    finally:
        previous.abort_transaction(30)
        restorer.close()
        ends.close()
    assert (stats.applied, stats.skipped) == (0, 0)
    assert (store.get("acme/pay/A"), store.changelog_offset) == (granted, end)
