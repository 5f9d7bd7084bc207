"""What one poll hands to the batch: the records already fetched, in broker-timestamp order
across partitions and offset order within each (``batch.in_time_order``), so an intent and
the claims it drew are decided in that order when one poll brings both. A fake consumer, no
broker."""

from __future__ import annotations

from types import SimpleNamespace

from ledger_lab.harness.records import FakeMessage
from ledger_stream.config import Settings
from ledger_stream.processor.runtime import Processor
from ledger_stream.processor.ticks import Ticker

INTENTS, ATTEMPTS = "ledger.intents", "ledger.attempts"


class FetchedConsumer:
    """Returns the records it holds in the order given: one from poll, the rest from
    consume."""

    def __init__(self, records: list[FakeMessage]) -> None:
        self._records = list(records)

    def poll(self, timeout: float) -> FakeMessage | None:
        return self._records.pop(0) if self._records else None

    def consume(self, n: int, timeout: float) -> list[FakeMessage]:
        out, self._records = self._records[:n], self._records[n:]
        return out

    def memberid(self) -> str:
        return "m1"

    def consumer_group_metadata(self) -> object:
        return object()


def test_a_poll_reaches_the_batch_in_time_order():
    # The client hands partition 4's claims (attempts) before partition 4's intent was
    # appended earlier; and partition 7's records interleave by time.
    fetched = [FakeMessage(ATTEMPTS, 4, 10, 2_000, None, None),
               FakeMessage(ATTEMPTS, 4, 11, 2_005, None, None),
               FakeMessage(INTENTS, 7, 3, 1_500, None, None),
               FakeMessage(INTENTS, 4, 20, 1_000, None, None),
               FakeMessage(INTENTS, 7, 4, 2_001, None, None)]
    p = Processor.__new__(Processor)
    p._consumer = FetchedConsumer(fetched)  # type: ignore[assignment]
    p._assignment = SimpleNamespace(epoch=1, released=set())  # type: ignore[assignment]
    p.settings = Settings(max_batch=100)
    p._ticker = Ticker(10**9)
    records, member, _ = p._collect()
    assert [(m.topic(), m.partition(), m.offset()) for m in records] == [
        (INTENTS, 4, 20), (INTENTS, 7, 3), (ATTEMPTS, 4, 10), (INTENTS, 7, 4),
        (ATTEMPTS, 4, 11)]
    assert member == "m1"


class _PositionlessError:
    """A consumer error with no topic, partition or offset (``_MAX_POLL_EXCEEDED``)."""

    def __init__(self) -> None:
        from confluent_kafka import KafkaError

        self._error = KafkaError(KafkaError._MAX_POLL_EXCEEDED, "max poll interval exceeded")

    def error(self) -> object:
        return self._error

    def topic(self) -> None:
        return None

    def partition(self) -> None:
        return None

    def offset(self) -> None:
        return None


class _LosingConsumer(FetchedConsumer):
    """poll returns the error; the consume after it serves a lost-partitions callback."""

    def __init__(self, assignment: object) -> None:
        super().__init__([])
        self._assignment = assignment

    def poll(self, timeout: float) -> object:
        return _PositionlessError()

    def consume(self, n: int, timeout: float) -> list[FakeMessage]:
        self._assignment.epoch += 1  # type: ignore[attr-defined]
        return []


def test_a_consumer_error_without_a_position_beside_a_rebalance_is_reported_not_a_crash():
    # Found by a hostile review (2026-12-05): with KIP-848, librdkafka queues the
    # max-poll-interval error right before the lost callback; the filter of the records of
    # a rebalanced poll read the error's position and raised ValueError.
    a = SimpleNamespace(epoch=1, released=set(), incremental=True,
                        taken_back=lambda: set(), current=lambda tp, again: True)
    p = Processor.__new__(Processor)
    p._consumer = _LosingConsumer(a)  # type: ignore[assignment]
    p._assignment = a  # type: ignore[assignment]
    p.settings = Settings(max_batch=100)
    p._ticker = Ticker(10**9)
    records, _, _ = p._collect()  # the error is logged (not fatal), nothing to decide
    assert records == []
