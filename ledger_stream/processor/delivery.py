"""How a batch's records reach Kafka and how its input offsets are committed: the common
part, and exactly once. Both guarantees implement steps b and c of the checkpoint (see
checkpoint.py).

Exactly once (the default): one transaction per batch, consecutive batches on two
producers in turn ("lanes"), each with a stable transactional id: ``<group>.<instance>`` and
``<group>.<instance>.b``. A lane's coordinator writes its commit markers for a few ms after
``commit_transaction`` returns and refuses that lane's next transaction meanwhile (librdkafka
retries it after a fixed 20 ms); the other lane's goes at once. The input offsets go into
the transaction with the consumer's group metadata (KIP-447), so a processor whose
generation is stale (paused past its session timeout, then resumed) cannot commit: its
transaction is aborted and its records are never visible to read_committed readers. A
restart with the same ids aborts its predecessor's open transaction, on either lane, at once
(``init_transactions`` of both lanes at start-up). Only the last changelog record of each
partition has its delivery report served to Python (its offset is the one the store
records): a record the broker refuses fails the transaction itself, whose commit then
raises, so the batch is abandoned and none of its records become visible.

At least once: ``at_least_once.py``.

Every failure is raised as :class:`BatchAbandoned`, never as a library error.
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ledger_stream.kafka.clients import Producer
from ledger_stream.kafka.reach import StopRequested
from ledger_stream.processor.exceptions import BatchAbandoned
from ledger_stream.processor.kafka_calls import Caller, classify

# One record to produce: (topic, value, key, partition or None, headers or None).
Outgoing = tuple[str, bytes | None, bytes | None, int | None, list[tuple[str, bytes]] | None]
PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
FLUSH_TIMEOUT_S = 30.0
TXN_TIMEOUT_S = 30.0
RETRIES = 3
# Past a transactional call's own timeout, how long before its producer counts as wedged.
WEDGED_GRACE_S = 5.0


class Delivery(ABC):
    """Sends one batch's records and commits its offsets, or raises BatchAbandoned."""

    # The client the records go through, built from its configuration (None: Kafka's; the
    # lab's CPU harness puts one without a broker here).
    client: Callable[[dict[str, Any]], Producer] | None = None

    def __init__(self, config: dict[str, Any], changelog_topic: str) -> None:
        self._config = config
        self._changelog = changelog_topic
        # Producers a call is stuck in, each with the caller stuck in it: kept until that
        # call returns (freeing one sooner would crash), then dropped (wedged).
        self._stuck: list[tuple[Producer, Caller]] = []
        self._errors: list[KafkaError] = []
        self._changelog_next: dict[int, int] = {}
        self._caller: Caller | None = None
        self._deadline: float | None = None  # stop_by: no call waits past it
        self._producer = self._new_producer()

    def stop_by(self, deadline: float) -> None:
        """From now on no call waits past ``deadline`` (``time.monotonic()``): the process
        was told to stop. A call cut short abandons its batch (never acknowledged, so safe:
        exactly once, its transaction is aborted by the successor's fencing)."""
        self._deadline = deadline

    def _within(self, timeout_s: float) -> float:
        """``timeout_s``, cut to what is left before the stop deadline."""
        if self._deadline is None:
            return timeout_s
        return max(0.0, min(timeout_s, self._deadline - time.monotonic()))

    # Whether every record's delivery report reaches ``_report`` (the producer's default
    # callback); exactly once only the one ``send_changelog`` asks for does.
    reports_each_record = True

    def _new_producer(self) -> Producer:
        self._let_go()
        config = {**self._config, "on_delivery": self._report} if self.reports_each_record \
            else dict(self._config)
        return (self.client or Producer)(self._configured(config))

    def _configured(self, config: dict[str, Any]) -> dict[str, Any]:
        """The configuration of the producer ``_new_producer`` starts now."""
        return config

    def _let_go(self) -> None:
        """Drop the wedged producers whose stuck call has returned (freeing them)."""
        if self._stuck:
            self._stuck = [(p, c) for p, c in self._stuck if not c.ended.is_set()]

    @property
    def wedged(self) -> list[Producer]:
        """Producers a call is still stuck in (a broker outage can make one per
        replacement: each is dropped once its call returns, at the next batch or
        replacement)."""
        return [p for p, c in self._stuck if not c.ended.is_set()]

    def _is_wedged(self, producer: Producer) -> bool:
        return any(p is producer for p, _ in self._stuck)

    def _report(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            if err.code() not in PURGED:  # records of a batch this process aborted
                self._errors.append(err)
        elif msg.topic() == self._changelog:
            partition, offset = msg.partition(), msg.offset()
            if offset + 1 > self._changelog_next.get(partition, 0):
                self._changelog_next[partition] = offset + 1

    def begin(self) -> None:
        self._let_go()  # an outage's wedged producers return after the last replacement
        self.begin_reports()

    def begin_reports(self) -> None:
        """Forget the delivery reports of earlier batches."""
        self._errors.clear()
        self._changelog_next = {}

    def send(self, topic: str, value: bytes | None, key: bytes | None,
             partition: int | None = None, headers: list[tuple[str, bytes]] | None = None,
             reported: bool = False) -> None:
        """Hand one record to the producer (waiting for room while its queue is full);
        ``reported``: its delivery report reaches ``_report`` whatever the default."""
        extra: dict[str, Any] = {}
        if partition is not None:
            extra["partition"] = partition
        if headers:
            extra["headers"] = headers
        if reported:
            extra["on_delivery"] = self._report
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, **extra)
                return
            except BufferError:
                pass  # the local queue is full: let deliveries drain
            except KafkaException as exc:
                raise classify(exc, "produce") from exc
            self._drain()  # not inside the handler above: its sibling would not catch this

    def _drain(self) -> None:
        """Serve delivery reports for a moment: the local queue is full."""
        try:
            self._producer.poll(0.05)
        except KafkaException as exc:
            raise classify(exc, "produce") from exc

    def send_all(self, records: Iterable[Outgoing]) -> None:
        """:meth:`send` for each of ``records`` (topic, value, key, partition or None,
        headers or None), in order: the producer's own call for each record while its queue
        takes them (a batch hands over a few thousand), :meth:`send`'s wait for room when
        it is full."""
        # The client's stub types headers as a list of (str, str | bytes | None), which a
        # list of (str, bytes) is not (lists are invariant): the same call, typed loosely.
        produce: Callable[..., None] = self._producer.produce
        for topic, value, key, partition, headers in records:
            try:
                if partition is None:
                    if headers:
                        produce(topic, value=value, key=key, headers=headers)
                    else:
                        produce(topic, value=value, key=key)
                elif headers:
                    produce(topic, value=value, key=key, partition=partition, headers=headers)
                else:
                    produce(topic, value=value, key=key, partition=partition)
            except BufferError:  # the local queue is full: wait for room, as send does
                self._drain()
                self.send(topic, value, key, partition, headers)
            except KafkaException as exc:
                raise classify(exc, "produce") from exc

    def send_changelog(self, topic: str, partition: int,
                       records: list[tuple[bytes, bytes, list[tuple[str, bytes]]]]) -> None:
        """One partition's changelog records (key, value, headers), in order. Where records
        are not reported one by one, the last one is: its offset is the partition's next."""
        self.send_all((topic, value, key, partition, headers)
                      for key, value, headers in records[:-1])
        if records:
            key, value, headers = records[-1]
            self.send(topic, value, key, partition, headers,
                      reported=not self.reports_each_record)

    def confirm(self) -> dict[int, int]:
        """Wait for every delivery report; the next changelog offset per partition written,
        for the partitions whose offsets were reported (at least once: none). Raises
        BatchAbandoned when any record reported was not acknowledged (exactly once, a
        refused record that is not reported fails the transaction's commit instead)."""
        try:
            left = self._flush(FLUSH_TIMEOUT_S)
        except KafkaException as exc:
            raise classify(exc, "flush") from exc
        if self._errors:
            err = self._errors[0]
            raise BatchAbandoned("delivery", f"delivery failed for {len(self._errors)} "
                                 f"record(s): {err.name()}: {err.str()}",
                                 new_producer=err.fatal())
        if left:
            raise BatchAbandoned("delivery", f"{left} record(s) not acknowledged after "
                                 f"{FLUSH_TIMEOUT_S:.0f} s")
        return dict(self._changelog_next)

    def _flush(self, timeout_s: float) -> int:
        """producer.flush for up to ``timeout_s``, in slices so that a stop begun meanwhile
        cuts it short (``stop_by``); the records still waiting for their reports."""
        until = time.monotonic() + timeout_s
        while True:
            slice_s = min(1.0, until - time.monotonic(), self._within(timeout_s))
            waiting = self._producer.flush(max(0.0, slice_s))
            if not waiting or slice_s <= 0 or time.monotonic() >= until:
                return int(waiting)

    @abstractmethod
    def commit(self, offsets: list[TopicPartition], group_metadata: Any) -> None:
        """Commit the batch: its input offsets (and, exactly once, its records)."""

    @abstractmethod
    def abort(self) -> None:
        """Drop what the batch sent, as far as the guarantee allows."""

    def replace_producer(self) -> None:
        """Close a failed producer and start a new one."""
        self._close_producer()
        self._producer = self._new_producer()

    def close(self) -> None:
        self._close_producer()
        if self._caller is not None:
            self._caller.stop()
            self._caller = None

    def _close_producer(self) -> None:
        if self._producer is None:  # closed already
            return
        if self._is_wedged(self._producer):
            # A thread is still blocked inside it: flushing or freeing it would block (or
            # crash) too. It stays referenced until the call returns (``_stuck``), fenced by
            # its successor's init_transactions.
            self._producer = None  # type: ignore[assignment]
            return
        # A fatal producer cannot flush; its records are not ours to keep.
        with contextlib.suppress(KafkaException):
            self._producer.flush(self._within(5))
        self._producer = None  # type: ignore[assignment]

    def _bounded(self, step: str, call: Callable[[], object], timeout_s: float,
                 stop: threading.Event | None = None) -> None:
        """Run a blocking transactional call under a deadline of our own.

        librdkafka does not always honour the timeout it is given: a
        ``send_offsets_to_transaction`` waiting for a group coordinator that went away can
        wait forever (confluentinc/librdkafka#5456, #5511; seen in the chaos soak when a
        broker was killed). The call runs in a thread; past ``timeout_s`` plus a grace, the
        producer is declared wedged and the batch abandoned with ``new_producer``: its
        successor, with the same transactional id, fences it and aborts its transaction.
        A set ``stop`` (a SIGTERM during start-up) ends the wait too: StopRequested.
        """
        caller = self._caller = self._caller or Caller()
        bound = timeout_s + WEDGED_GRACE_S

        def left() -> float:
            return 0.0 if stop is not None and stop.is_set() else self._within(bound)

        outcome = caller.run(call, bound, left)
        if outcome is None:
            self._caller = None  # its thread is stuck in the call, and ends after it
            caller.stop()
            self._stuck.append((self._producer, caller))
            if stop is not None and stop.is_set():
                raise StopRequested(f"{step}: told to stop")
            raise BatchAbandoned(
                "producer_wedged", f"{step} did not return within "
                f"{timeout_s + WEDGED_GRACE_S:.0f} s (a coordinator went away; librdkafka "
                "ignores the call's timeout then): a new producer fences the stuck one",
                new_producer=True)
        if outcome:
            raise outcome[0]


# The second lane's transactional id is the first's with this suffix: under the group's
# prefix, which the processor's ACLs grant (kafka/acls.py).
SECOND_LANE = ".b"


def lane_ids(transactional_id: str) -> tuple[str, str]:
    """The transactional ids of the two lanes: ``transactional_id`` itself (the one id of a
    processor from before the lanes, so an upgrade fences it) and the second lane's."""
    return transactional_id, f"{transactional_id}{SECOND_LANE}"


class ExactlyOnceDelivery(Delivery):
    """One transaction per batch, consecutive batches on two producers in turn (lanes).

    A lane's next transaction is refused (CONCURRENT_TRANSACTIONS, retried by librdkafka
    after a fixed 20 ms) while its coordinator still writes the previous one's markers, a
    few ms after ``commit_transaction`` returned; the other lane's is not. A batch begins
    only after the previous one's commit returned, so per partition the records stay in
    batch order, read_committed readers stop at the previous transaction until its
    markers land, and of two offset commits of one partition the later-appended one wins
    whichever marker lands last (the group coordinator materializes a transactional commit
    only over an older one). Both lanes are initialised at start-up, so a successor
    aborts (or completes) its predecessor's open transaction on either lane at once.
    """

    # No Python call per record delivered: a record the broker refuses fails the
    # transaction (commit_transaction raises an abortable error, the batch is abandoned and
    # none of its records become visible), so only each partition's last changelog record
    # is reported, for the changelog offset its store records.
    reports_each_record = False

    def __init__(self, config: dict[str, Any], changelog_topic: str,
                 stop: threading.Event | None = None) -> None:
        """``stop``: set by a SIGTERM during start-up; it ends the producers' set-up
        (``init_transactions`` and its retries) within WAIT_SLICE_S: StopRequested."""
        self._ids = lane_ids(str(config.get("transactional.id", "")))
        self._lane = 0  # the lane whose producer is ``_producer``
        self._turn = 0  # the lane the next batch takes
        self._in_transaction = False
        super().__init__(config, changelog_topic)  # the first lane's producer
        self._lanes: list[Producer] = [self._producer]
        try:
            self._init_transactions(stop)
            self._lane = 1
            self._producer = self._new_producer()
            self._lanes.append(self._producer)
            self._init_transactions(stop)
        except BaseException:
            # No delivery comes of it, but the error's traceback holds this object: a lane
            # left in it would keep its producer (connections, a fresh epoch) for as long.
            self.close()
            raise
        self._use(0)

    @property
    def transactional_id(self) -> str:
        """The transactional id of the lane in use (the current or last batch's)."""
        return self._ids[self._lane]

    def _configured(self, config: dict[str, Any]) -> dict[str, Any]:
        if "transactional.id" not in config:
            return config
        return {**config, "transactional.id": self._ids[self._lane]}

    def _use(self, lane: int) -> None:
        self._lane = lane
        self._producer = self._lanes[lane]

    def _init_transactions(self, stop: threading.Event | None = None) -> None:
        pause = time.sleep if stop is None else stop.wait
        for attempt in range(1, RETRIES + 1):
            try:
                self._bounded("init_transactions",
                              partial(self._producer.init_transactions, TXN_TIMEOUT_S),
                              TXN_TIMEOUT_S, stop)
                return
            except KafkaException as exc:
                if attempt == RETRIES or not exc.args[0].retriable():
                    raise classify(exc, "init_transactions") from exc
                if pause(0.5 * attempt):  # stop.wait: True once told to stop
                    raise StopRequested("init_transactions: told to stop") from exc

    def replace_producer(self) -> None:
        """Replace the producer of the lane in use (the failed batch's), with the lane's
        own transactional id: its ``init_transactions`` fences the failed one and aborts
        its open transaction. The other lane is untouched."""
        self._in_transaction = False
        super().replace_producer()
        self._lanes[self._lane] = self._producer
        self._init_transactions()

    def close(self) -> None:
        """Close both lanes' producers and let them go (a producer is closed when its last
        reference goes); closing again does nothing."""
        current = self._producer
        for producer in self._lanes:
            if producer is not current:
                self._producer = producer
                self._close_producer()
        self._producer = current
        super().close()
        self._lanes = []

    def begin(self) -> None:
        super().begin()
        self._use(self._turn)  # no transaction is open: the previous one committed or aborted
        self._turn = 1 - self._turn
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise classify(exc, "begin_transaction") from exc
        self._in_transaction = True

    def commit(self, offsets: list[TopicPartition], group_metadata: Any) -> None:
        # Not before the records are confirmed: librdkafka sends AddOffsetsToTxn beside an
        # AddPartitionsToTxn still open, the coordinator answers CONCURRENT_TRANSACTIONS,
        # and the retry waits retry.backoff.ms (100 ms; measured, every transaction).
        producer = self._producer
        if offsets:
            self._retrying("send_offsets_to_transaction",
                           lambda: producer.send_offsets_to_transaction(
                               offsets, group_metadata, TXN_TIMEOUT_S))
        self._retrying("commit_transaction",
                       lambda: producer.commit_transaction(TXN_TIMEOUT_S))
        self._in_transaction = False

    def _retrying(self, step: str, call: Callable[[], object]) -> None:
        for attempt in range(1, RETRIES + 1):
            try:
                self._bounded(step, call, TXN_TIMEOUT_S)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if attempt == RETRIES or not err.retriable() or err.txn_requires_abort():
                    raise classify(exc, step) from exc

    def abort(self) -> None:
        if not self._in_transaction:
            return
        self._in_transaction = False
        if self._is_wedged(self._producer):
            raise BatchAbandoned("producer_wedged", "the producer is wedged: a new one "
                                 "aborts its transaction", new_producer=True)
        producer = self._producer
        try:
            self._bounded("abort_transaction",
                          lambda: producer.abort_transaction(TXN_TIMEOUT_S), TXN_TIMEOUT_S)
        except KafkaException as exc:
            # A producer that cannot abort is unusable: a new one (same transactional id)
            # aborts the open transaction when it initialises.
            raise classify(exc, "abort_transaction") from exc
        # Serve the purged records' reports now, not during the next batch's confirmation.
        with contextlib.suppress(KafkaException):
            self._producer.flush(self._within(FLUSH_TIMEOUT_S))
        self.begin_reports()
