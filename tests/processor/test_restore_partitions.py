"""``restore_partitions``'s record loop without a broker: a fake client hands over two
partitions' changelog records, of every kind restore meets, and each store must end as the
general path (``apply_records`` over the parsed records) leaves it; an error record stops
the restore with ProcessorError. The Kafka tests (test_restore_kafka.py) cover the client."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from ledger_lab.harness.records import FakeMessage
from ledger_stream.domain import decide
from ledger_stream.domain.deadlines import deadline_basis
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import absent
from ledger_stream.processor.changelog import (
    CLOCK_KEY,
    Positions,
    clock_value,
    due_header,
    headers,
    parse,
)
from ledger_stream.processor.exceptions import ProcessorError
from ledger_stream.processor.restore import apply_records, restore_partitions
from ledger_stream.state import MemoryPartitionStore, encode_row
from tests.factories import claim, intent

pytestmark = pytest.mark.timeout(30)

POLICY = Policy()
GROUP = "ledger-processor"
TOPIC = "ledger.changelog"


class ErrorMessage(FakeMessage):
    def error(self) -> Any:  # type: ignore[override]
        return KafkaError(KafkaError._MSG_TIMED_OUT)


class FakeClient:
    """Hands over the assigned partitions' records a few at a time; positions follow."""

    def __init__(self, records: dict[int, list[FakeMessage]]) -> None:
        self.records = records
        self.queue: list[FakeMessage] = []
        self.next: dict[int, int] = {}
        self.assigned = False

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = True
        for tp in tps:
            self.next[tp.partition] = tp.offset
            self.queue += [m for m in self.records[tp.partition] if m.offset() >= tp.offset]

    def unassign(self) -> None:
        self.assigned = False

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.next[tp.partition]) for tp in tps]

    def poll(self, timeout: float) -> FakeMessage | None:
        found = self.consume(1, timeout)
        return found[0] if found else None

    def consume(self, n: int, timeout: float) -> list[FakeMessage]:
        given, self.queue = self.queue[:min(n, 3)], self.queue[min(n, 3):]
        for m in given:
            self.next[m.partition()] = m.offset() + 1
        return given

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, len(self.records[tp.partition])


def _changelog() -> dict[int, list[FakeMessage]]:
    event = intent(key="acme/pay/A", at_ms=1_000)
    reserved = decide(absent(event.key), event, POLICY, 1_000).state
    granted = decide(reserved, claim(key=event.key, at_ms=2_000), POLICY, 2_000).state

    def row(state: Any, at: Positions, group: str = GROUP) -> tuple[bytes, list[Any]]:
        return encode_row(state), [*headers(group, at), due_header(deadline_basis(state))]

    kinds = [
        (b"acme/pay/A", *row(reserved, Positions(3, 1))),
        (CLOCK_KEY, clock_value(1_000), headers(GROUP, Positions(3, 1))),
        (b"acme/pay/B", *row(reserved, Positions(3, 1))),
        (b"acme/pay/C", *row(reserved, Positions(9, 9), "another-group")),  # not ours
        (b"acme/pay/A", *row(granted, Positions(3, 2))),
        (b"acme/pay/B", None, headers(GROUP, Positions(3, 2))),  # a tombstone
        (b"acme/pay/D", encode_row(reserved), None),  # no headers: not ours
        (b"acme/pay/A", *row(granted, Positions(4, 4))),  # a batch not committed yet
        (CLOCK_KEY, clock_value(5_000), headers(GROUP, Positions(4, 4))),
    ]
    return {p: [FakeMessage(TOPIC, p, offset, 0, key, value, hs)
                for offset, (key, value, hs) in enumerate(kinds[p:])] for p in (0, 1)}


def _store_state(store: MemoryPartitionStore) -> tuple[Any, ...]:
    return (store.changelog_offset, store.clock_ms, list(store.due_timers(2**62)),
            [store.get(k) for k in ("acme/pay/A", "acme/pay/B", "acme/pay/C", "acme/pay/D")])


def test_each_partition_is_restored_as_the_general_path_restores_it() -> None:
    records = _changelog()
    committed = {0: Positions(3, 2), 1: Positions(3, 2)}
    stores = {p: MemoryPartitionStore(p) for p in records}
    client = FakeClient(records)
    stats = restore_partitions(client, TOPIC, stores, committed, GROUP, POLICY,  # type: ignore[arg-type]
                               ends=client)  # type: ignore[arg-type]
    applied = skipped = 0
    for p, found in records.items():
        reference = MemoryPartitionStore(p)
        done = apply_records(reference, [parse(m.offset(), m.key(), m.value(), m.headers())
                                         for m in found], committed[p], GROUP, POLICY,
                             end_offset=len(found))
        applied, skipped = applied + done.applied, skipped + done.skipped
        assert _store_state(stores[p]) == _store_state(reference), p
    assert (stats.applied, stats.skipped) == (applied, skipped)
    assert stores[0].get("acme/pay/A") is not None and stores[0].clock_ms == 1_000
    assert stores[0].changelog_offset == 7  # held at the first record not committed yet
    assert not client.assigned  # the restore client is released


def test_an_error_record_stops_the_restore() -> None:
    records = _changelog()
    records[1].insert(2, ErrorMessage(TOPIC, 1, 2, 0, None, None))
    stores = {p: MemoryPartitionStore(p) for p in records}
    client = FakeClient(records)
    with pytest.raises(ProcessorError, match="restoring from ledger.changelog failed"):
        restore_partitions(client, TOPIC, stores, {0: Positions(3, 2), 1: Positions(3, 2)},  # type: ignore[arg-type]
                           GROUP, POLICY, ends=client)  # type: ignore[arg-type]
    assert not client.assigned
