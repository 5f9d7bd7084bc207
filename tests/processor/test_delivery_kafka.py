"""At least once on a real broker: librdkafka reports failures only (no Python call per record
delivered), a changelog write the broker refuses still abandons the batch before its input
offsets are committed, and the store's changelog offset, counted instead of reported, is
the changelog's true end (never past it). Exactly once: one report per partition (its last
changelog record, whose offset the store records), and a refused write, not reported,
still abandons the batch: its transaction cannot commit."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from ledger_stream.config import Settings
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.offsets import end_offset
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor import clients
from ledger_stream.processor.at_least_once import AtLeastOnceDelivery
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.checkpoint import Checkpoint
from ledger_stream.processor.delivery import ExactlyOnceDelivery
from ledger_stream.processor.exceptions import BatchAbandoned
from ledger_stream.processor.runtime import OUTPUT_ROLES
from ledger_stream.processor.step import LedgerStep
from ledger_stream.state import RocksDBPartitionStore
from tests.factories import intent
from tests.processor.fakes import (
    ATTEMPTS,
    CODEC,
    INTENTS,
    PARTITIONS,
    FakeMessage,
    make_step,
    record_of,
)

pytestmark = pytest.mark.timeout(120)
MEMBER = "member-1"


class Member:
    """The consumer calls of a checkpoint: a member of the group; counts its commits."""

    def __init__(self) -> None:
        self.commits: list[list[TopicPartition]] = []

    def memberid(self) -> str:
        return MEMBER

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> None:
        self.commits.append(offsets)


class Reported(AtLeastOnceDelivery):
    """Keeps every delivery report served to Python."""

    def __init__(self, *args: Any) -> None:
        self.reports: list[Any] = []
        super().__init__(*args)

    def _report(self, err: Any, msg: Any) -> None:
        self.reports.append(err)
        super()._report(err, msg)


def _limit_changelog(bootstrap: str, topic: str, max_bytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("max.message.bytes", str(max_bytes),
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    # The broker applies a topic's new config after it answered the change: write to the
    # changelog until it refuses (each probe goes to every partition, as a batch's rows
    # may), so the lost write below cannot race the limit.
    probe = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    refused: list[Any] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        refused.clear()
        for partition in range(PARTITIONS):
            probe.produce(topic, b"x" * (4 * max_bytes), partition=partition,
                          on_delivery=lambda err, _msg: refused.append(err))
        probe.flush(10)
        if len(refused) == PARTITIONS and all(err is not None for err in refused):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} still takes records over {max_bytes} bytes after 30 s")


def test_at_least_once_counts_changelog_offsets_and_stops_on_a_lost_write(
        ledger_topics: Settings, tmp_path: Path) -> None:
    bootstrap = ledger_topics.kafka_bootstrap
    assert bootstrap is not None
    changelog_topic = ledger_topics.topic("changelog")
    member = Member()
    delivery = Reported(clients.producer_settings(bootstrap, None), changelog_topic, member)
    step = make_step(Policy())
    stores = {p: RocksDBPartitionStore(tmp_path / f"p{p}", p) for p in range(PARTITIONS)}
    checkpoint = Checkpoint(delivery, member, step,  # type: ignore[arg-type]
                            {role: ledger_topics.topic(role) for role in OUTPUT_ROLES},
                            "group", "one")
    ends = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    offset = 0

    def batch_of(count: int) -> Batch:
        nonlocal offset
        batch = Batch(step, stores, {}, (INTENTS, ATTEMPTS), MEMBER)  # type: ignore[arg-type]
        batch.add_all([record_of(intent(f"acme/pay/k{offset + i}"), INTENTS, offset + i,  # type: ignore[list-item]
                                 1_000 + offset + i) for i in range(count)])
        offset += count
        return batch

    try:
        for _ in range(3):
            checkpoint.run(batch_of(20))
        assert delivery.reports == []  # 60 decisions, their receipts, dispatches, rows
        assert len(member.commits) == 3
        for partition, store in stores.items():
            true_end = end_offset(ends, TopicPartition(changelog_topic, partition))
            assert store.changelog_offset == true_end > 0

        # The broker refuses the next rows (larger than the topic takes): a lost write.
        _limit_changelog(bootstrap, changelog_topic, 64)
        before = {p: (s.changelog_offset, s.clock_ms) for p, s in stores.items()}
        with pytest.raises(BatchAbandoned) as why:
            checkpoint.run(batch_of(5))
        assert why.value.kind == "delivery"
        assert delivery.reports and all(err is not None for err in delivery.reports)
        assert len(member.commits) == 3  # its input offsets were never committed
        assert {p: (s.changelog_offset, s.clock_ms) for p, s in stores.items()} == before
    finally:
        ends.close()
        delivery.close()
        for store in stores.values():
            store.close()


class ReportedOnce(ExactlyOnceDelivery):
    """Keeps every delivery report served to Python."""

    def __init__(self, *args: Any) -> None:
        self.reports: list[Any] = []
        super().__init__(*args)

    def _report(self, err: Any, msg: Any) -> None:
        self.reports.append((err, msg.topic(), msg.partition()))
        super()._report(err, msg)


class Generation(Member):
    def consumer_group_metadata(self) -> Any:
        raise AssertionError("not asked: the batch holds the metadata of its poll")


def test_exactly_once_reports_one_record_per_partition_and_a_lost_write_still_aborts(
        ledger_topics: Settings, tmp_path: Path) -> None:
    bootstrap = ledger_topics.kafka_bootstrap
    assert bootstrap is not None
    changelog_topic = ledger_topics.topic("changelog")
    group = f"eos-{tmp_path.name}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    delivery = ReportedOnce(clients.producer_settings(bootstrap, f"{group}.one"),
                            changelog_topic)
    # Real input topics: the transaction commits the batch's offsets on them.
    inputs = (ledger_topics.topic("intents"), ledger_topics.topic("attempts"))
    partitions = ledger_topics.partitions
    step = LedgerStep(Policy(), CODEC, dict(zip(inputs, ("intents", "attempts"), strict=True)),
                      partitions)
    stores = {p: RocksDBPartitionStore(tmp_path / f"p{p}", p) for p in range(partitions)}
    checkpoint = Checkpoint(delivery, Generation(), step,  # type: ignore[arg-type]
                            {role: ledger_topics.topic(role) for role in OUTPUT_ROLES},
                            group, "one")
    ends = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends",
                     "isolation.level": "read_committed"})
    offset = 0

    def batch_of(count: int) -> Batch:
        nonlocal offset
        batch = Batch(step, stores, {}, inputs, MEMBER,  # type: ignore[arg-type]
                      consumer.consumer_group_metadata())
        events = [intent(f"acme/pay/e{offset + i}") for i in range(count)]
        batch.add_all([FakeMessage(inputs[0], partition_for(e.key, partitions), offset + i,  # type: ignore[misc]
                                   1_000 + offset + i, e.key.encode(), CODEC.encode(e))
                       for i, e in enumerate(events)])
        offset += count
        return batch

    try:
        batch = batch_of(20)
        checkpoint.run(batch)
        # 20 receipts, 20 dispatches, 20 rows, the clocks: one report per partition.
        assert sorted(p for _, _, p in delivery.reports) == sorted(batch.overlays)
        assert all(err is None and topic == changelog_topic
                   for err, topic, _ in delivery.reports)
        for partition, store in stores.items():
            # Its last record's offset + 1: the commit marker follows it, written by the
            # coordinator a moment after the commit returned (then the end moves past it).
            deadline = time.monotonic() + 10
            while (end := end_offset(ends, TopicPartition(changelog_topic, partition))) \
                    != store.changelog_offset + 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert store.changelog_offset == end - 1 > 0

        # The broker refuses the dispatches now (larger than the topic takes), whose
        # reports nobody reads: the transaction cannot commit, so the batch is abandoned.
        _limit_changelog(bootstrap, ledger_topics.topic("dispatch"), 64)
        time.sleep(2)  # the broker applies a topic's new configuration a moment later
        before = {p: (s.changelog_offset, s.clock_ms) for p, s in stores.items()}
        with pytest.raises(BatchAbandoned) as why:
            checkpoint.run(batch_of(5))
        # "aborted": the transaction said so, not a delivery report (none was asked for):
        # at its commit, or at a later produce of the batch when the broker's refusal came
        # back first (the transaction is then in error: librdkafka's "Erroneous state";
        # a CI run on 2026-12-07 met it).
        said = str(why.value)
        assert why.value.kind == "aborted" and (
            "Message size too large" in said or "produce: _STATE" in said), said
        delivery.abort()
        assert {p: (s.changelog_offset, s.clock_ms) for p, s in stores.items()} == before
    finally:
        ends.close()
        consumer.close()
        delivery.close()
        for store in stores.values():
            store.close()
