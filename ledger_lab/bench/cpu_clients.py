"""Kafka clients without a broker for the CPU harness (``ledger_lab.bench.cpu``): the calls
the processor's checkpoint makes, at the cost of a list append, so what the harness measures
is the processor's own Python work around them.

:class:`LogProducer` keeps every record it was handed, per topic and partition, in the order
a broker would append them, and serves the delivery reports the way librdkafka does: inside
``flush`` (or ``poll``), one call of the record's callback (its own, else the configured
``on_delivery``) per record, errors only when ``delivery.report.only.error`` is set. A record
produced without a partition goes where ``murmur2_random`` puts its key (resolved only when
the log is read, as librdkafka does it in C).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from confluent_kafka import TopicPartition

from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.at_least_once import AtLeastOnceDelivery
from ledger_stream.processor.delivery import ExactlyOnceDelivery

Report = Callable[[Any, Any], None]
Record = tuple[str, int | None, bytes | None, bytes | None, tuple[tuple[str, bytes], ...],
               Report | None]


class Delivered:
    """What a delivery report hands its callback: the record's topic, partition, offset."""

    __slots__ = ("_offset", "_partition", "_topic")

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


# Where the producers of one run append (config key): exactly once's two lanes share a log.
BOOK = "ledger.lab.book"


class LogBook:
    """The topics' records a run's producers appended, and each partition's next offset."""

    def __init__(self) -> None:
        self.kept: list[tuple[str, int | None, bytes | None, bytes | None, Any]] = []
        self.next: dict[tuple[str, int], int] = {}


class LogProducer:
    """The producer calls of :class:`~ledger_stream.processor.delivery.Delivery`, no broker.
    Transactions commit (or abort) the records handed over since ``begin_transaction``.
    Producers given one :class:`LogBook` (config ``BOOK``) append to one log."""

    partitions = 12  # of every topic: set by the harness before the first producer

    def __init__(self, config: dict[str, Any]) -> None:
        self._report: Report | None = config.get("on_delivery")
        self._errors_only = bool(config.get("delivery.report.only.error"))
        self._pending: list[Record] = []  # handed over, report not served yet
        self._open: list[tuple[str, int | None, bytes | None, bytes | None, Any]] = []
        book = config.get(BOOK) or LogBook()
        self._kept, self._next = book.kept, book.next
        self._transactional = "transactional.id" in config
        self.reported: list[tuple[str, int, int]] = []  # (topic, partition, offset) reported

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                partition: int | None = None, headers: Any = None,
                on_delivery: Report | None = None) -> None:
        self._pending.append((topic, partition, key, value, tuple(headers or ()),
                              on_delivery or self._report))

    def poll(self, timeout: float = 0) -> int:
        return self._serve()

    def flush(self, timeout: float = 0) -> int:
        self._serve()
        return 0

    def _serve(self) -> int:
        """Append the pending records (offsets in hand-over order) and serve their reports."""
        pending, self._pending = self._pending, []
        for topic, partition, key, value, headers, report in pending:
            where = partition if partition is not None else -1
            offset = self._next.get((topic, where), 0)
            self._next[(topic, where)] = offset + 1
            self._open.append((topic, partition, key, value, headers))
            if report is not None and not self._errors_only:
                self.reported.append((topic, where, offset))
                report(None, Delivered(topic, where, offset))
        if not self._transactional:
            self._append()
        return len(pending)

    def _append(self) -> None:
        self._kept.extend(self._open)  # in place: the book is shared
        self._open = []

    @property
    def log(self) -> dict[tuple[str, int], list[tuple[bytes | None, bytes | None, Any]]]:
        """The records appended (committed, in a transaction), per topic and partition."""
        found: dict[tuple[str, int], list[tuple[bytes | None, bytes | None, Any]]] = {}
        for topic, partition, key, value, headers in self._kept:
            where = partition if partition is not None else partition_for(
                key or b"", self.partitions)
            found.setdefault((topic, where), []).append((key, value, headers))
        return found

    def init_transactions(self, timeout: float = 0) -> None:
        return None

    def begin_transaction(self) -> None:
        return None

    def send_offsets_to_transaction(self, offsets: list[TopicPartition], metadata: Any,
                                    timeout: float = 0) -> None:
        return None

    def commit_transaction(self, timeout: float = 0) -> None:
        self._serve()
        self._append()

    def abort_transaction(self, timeout: float = 0) -> None:
        self._pending, self._open = [], []


class LogConsumer:
    """The consumer calls of the checkpoint: a member of the group that commits anything."""

    def __init__(self) -> None:
        self.commits = 0

    def memberid(self) -> str:
        return "cpu-harness"

    def consumer_group_metadata(self) -> object:
        return self

    def commit(self, offsets: list[TopicPartition] | None = None,
               asynchronous: bool = True) -> None:
        self.commits += 1


class HarnessAtLeastOnce(AtLeastOnceDelivery):
    client = LogProducer  # type: ignore[assignment]  # the calls Delivery makes


class HarnessExactlyOnce(ExactlyOnceDelivery):
    client = LogProducer  # type: ignore[assignment]  # the calls Delivery makes


def log_digest(log: dict[tuple[str, int], list[tuple[bytes | None, bytes | None, Any]]]
               ) -> str:
    """SHA-256 of every topic-partition's records (key, value, headers) in log order."""
    digest = hashlib.sha256()
    for (topic, partition) in sorted(log):
        digest.update(f"{topic}/{partition}\n".encode())
        for key, value, headers in log[(topic, partition)]:
            digest.update(repr((key, value, tuple(headers))).encode())
    return digest.hexdigest()
