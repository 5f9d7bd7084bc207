"""After ``repartition``, a record a producer placed under the partition count before it (its
client had not refreshed its metadata yet) is forwarded unchanged to its key's partition
now, to be decided by the owner of the key's state; any other misplaced record is still
poison."""

from __future__ import annotations

from ledger_lab.harness.records import FakeMessage
from ledger_stream.domain import events as ev
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.step import Forward, LedgerStep, Out
from ledger_stream.state import MemoryPartitionStore
from tests.factories import intent
from tests.processor.fakes import ATTEMPTS, CODEC, INTENTS

BEFORE, AFTER = 3, 6


def _moved_key() -> tuple[str, int, int]:
    for i in range(100):
        key = f"acme/refund/fwd-{i}"
        old, new = partition_for(key, BEFORE), partition_for(key, AFTER)
        if old != new:
            return key, old, new
    raise AssertionError("no key moves")


def test_a_record_placed_under_the_old_count_is_forwarded_to_its_home() -> None:
    key, old, new = _moved_key()
    grown = LedgerStep(_policy(), CODEC, {INTENTS: "intents", ATTEMPTS: "attempts"}, AFTER,
                       grown_from=BEFORE)
    value = CODEC.encode(intent(key=key))
    assert grown.read(value, key.encode(), INTENTS, old, 7, 1_000) == Forward("intents", new)
    store = MemoryPartitionStore(old)
    batch = Batch(grown, {old: store}, {}, (INTENTS, ATTEMPTS))
    batch.add(FakeMessage(INTENTS, old, 7, 1_000, key.encode(), value,  # type: ignore[arg-type]
                          [("traceparent", b"00-x")]))
    assert batch.outputs == [Out("intents", key.encode(), value, (("traceparent", b"00-x"),),
                                 new)]
    assert batch.offsets()  # committed past it: decided once, at its home


def test_without_a_repartition_a_misplaced_record_is_still_poison() -> None:
    key, old, _ = _moved_key()
    step = LedgerStep(_policy(), CODEC, {INTENTS: "intents", ATTEMPTS: "attempts"}, AFTER)
    read = step.read(CODEC.encode(intent(key=key)), key.encode(), INTENTS, old, 7, 1_000)
    assert isinstance(read, ev.PoisonInput)


def _policy() -> Policy:
    return Policy()


class _UnreadableHeaders(FakeMessage):
    """A record whose header names are not UTF-8: confluent-kafka raises on headers()."""

    def headers(self) -> list[tuple[str, bytes]]:
        raise SystemError("<built-in method headers> returned a result with an exception set")


def test_a_record_to_forward_whose_headers_cannot_be_read_is_forwarded_without_them() -> None:
    # Not a crash of the processor (which would meet the same record again on restart):
    # the record goes on to its home, only its unreadable headers stay behind.
    key, old, new = _moved_key()
    grown = LedgerStep(_policy(), CODEC, {INTENTS: "intents", ATTEMPTS: "attempts"}, AFTER,
                       grown_from=BEFORE)
    value = CODEC.encode(intent(key=key))
    batch = Batch(grown, {old: MemoryPartitionStore(old)}, {}, (INTENTS, ATTEMPTS))
    batch.add_all([_UnreadableHeaders(INTENTS, old, 7, 1_000,  # type: ignore[list-item]
                                      key.encode(), value)])
    assert batch.outputs == [Out("intents", key.encode(), value, (), new)]
