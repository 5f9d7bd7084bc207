"""One receipts subscription per client, shared by every ``submit`` of the process.

A background thread reads the receipts partitions that some caller is waiting on and hands
each receipt to the waiters of its key. A waiter is registered *before* its intent is
produced, and a partition is first read from its end offset at that moment, so the answer
(written after the intent) cannot be missed: records written later have later offsets, and a
read-committed consumer is never past a transaction that is still open. Partitions stay
assigned for the client's life (a handful; their records are skipped unread unless their key
is awaited), so the second submit to a partition costs no Kafka round trip at all.

The thread waits for records with ``poll`` and then drains what is already fetched: there is
no fixed batch wait between a receipt's arrival and its waiter. Only that thread touches the
consumer (a client call on it from another thread blocks while it polls); the end offsets come
from the caller (the client's admin, which has already learned the cluster when it counted the
partitions), and the thread applies new assignments between polls (the start offset is fixed
before the intent is produced, so a late assignment misses nothing). The thread first has the
consumer learn the topic's leaders, while the first submit produces its intent: a new client's
first topic request can be lost in librdkafka's bootstrap handover (``learn_leaders``).

Nothing a record or a bug raises ends the thread (every later submit of the client waits on
it): a schema registry outage holds it on the receipt it could not decode, retried until the
registry answers; anything else is logged and the next record handed over.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaException, Message, TopicPartition

from ledger_stream import tracing
from ledger_stream.domain.events import Receipt
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.offsets import learn_leaders
from ledger_stream.logs import log_fields
from ledger_stream.sdk.follow import PENDING
from ledger_stream.serde import AvroCodec, DecodeError
from ledger_stream.serde.exceptions import SerdeError

logger = logging.getLogger(__name__)

W = TypeVar("W", bound="ReceiptWaiter")

POLL_S = 0.05  # how long one poll waits for the first record; a new partition waits at most
# this (the first one not at all: until then the thread waits for an assignment instead)
DRAIN = 500  # records taken per drain of what is already fetched
LEARN_S = 2.0  # how long the thread tries to learn the leaders before its first poll
PATIENCE_S = 15.0  # how long a partition's first end offset is retried by default
# How long the broker may hold a fetch that finds nothing new. It answers as soon as a
# record is readable (for a read-committed fetch: once its transaction commits), so this
# adds nothing to a receipt's wait; what it sets is how often an idle client asks. At 10 ms
# the client's fetch thread sent ~100 empty fetches a second, about a third of the client's
# CPU per fresh effect for one agent (2.25-3.0 ms against 1.75-2.0 at 500 ms, latency
# unchanged); 100 ms keeps the cached high watermark (the floor of new waiters) as fresh as
# any fetch answered by new data.
FETCH_WAIT_MS = 100


class ReceiptWaiter:
    """The receipts of one key, from the moment it was registered, for one thread.
    ``floor``: records below this offset were in the log before it was registered, so none
    answers its caller (set by the hub before the waiter is visible to its thread)."""

    def __init__(self, hub: ReceiptHub, key: str) -> None:
        self.key = key
        self.floor = 0
        self._hub = hub
        self._cond = threading.Condition(threading.Lock())
        self._arrived: list[Receipt] = []
        self._settled = False  # a receipt that is not pending arrived and was not read yet
        self._until_settled = False  # its reader waits for such a receipt, not for any
        self.traces: dict[str, tracing.Headers] = {}  # receipt id -> its trace headers

    def deliver(self, receipt: Receipt, trace: tracing.Headers = ()) -> None:
        if trace:
            self.traces[receipt.receipt_id] = trace
        with self._cond:
            self._arrived.append(receipt)
            settles = receipt.status not in PENDING
            self._settled = self._settled or settles
            if settles or not self._until_settled:  # else its reader would only wait again
                self._cond.notify()

    def read(self, timeout_s: float) -> list[Receipt]:
        """What arrived: waits up to ``timeout_s`` for the first receipt, then takes the rest
        already delivered (may be empty)."""
        return self._take(timeout_s, until_settled=False)

    def read_settled(self, timeout_s: float) -> list[Receipt]:
        """Everything delivered, in order, once a receipt that is not pending is among it
        or ``timeout_s`` has passed (then possibly only pending ones, or none). A submit's
        thread wakes once per answer instead of once per pending receipt before it."""
        return self._take(timeout_s, until_settled=True)

    def _take(self, timeout_s: float, until_settled: bool) -> list[Receipt]:
        with self._cond:
            self._until_settled = until_settled
            try:
                self._cond.wait_for(lambda: self._settled if until_settled
                                    else bool(self._arrived), max(0.0, timeout_s))
            finally:
                self._until_settled = False
            found, self._arrived, self._settled = self._arrived, [], False
            return found

    def close(self) -> None:
        self._hub.forget(self)


class AsyncReceiptWaiter(ReceiptWaiter):
    """The same for a coroutine: delivered into the event loop, no thread per wait."""

    def __init__(self, hub: ReceiptHub, key: str, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(hub, key)
        self._loop = loop
        self._aqueue: asyncio.Queue[Receipt] = asyncio.Queue()

    def deliver(self, receipt: Receipt, trace: tracing.Headers = ()) -> None:
        if trace:
            self.traces[receipt.receipt_id] = trace
        try:
            self._loop.call_soon_threadsafe(self._aqueue.put_nowait, receipt)
        except RuntimeError:  # its event loop is closed: no one is waiting any more
            self.close()

    async def read_async(self, timeout_s: float) -> list[Receipt]:
        try:
            found = [await asyncio.wait_for(self._aqueue.get(), max(0.0, timeout_s))]
        except TimeoutError:
            return []
        while not self._aqueue.empty():
            found.append(self._aqueue.get_nowait())
        return found


class ReceiptHub:
    """The client's one receipts consumer and the thread that demultiplexes it by key."""

    def __init__(self, bootstrap: str, topic: str, codec: AvroCodec,
                 partition_of: Callable[[str], int],
                 end_offset: Callable[[int, float], int]) -> None:
        """``end_offset(partition, patience_s)``: the partition's read-committed end offset,
        asked for after the call began, retried through elections for ``patience_s``."""
        self._topic = topic
        self._codec = codec
        self._partition_of = partition_of
        self._end_offset = end_offset
        config = {
            "bootstrap.servers": bootstrap,
            **CLIENT_CONFIG,
            "group.id": f"ledger-sdk-{uuid.uuid4().hex}",  # never joined: partitions assigned
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
        }
        self._consumer = Consumer(config)  # the thread's alone
        self._to_assign: queue.SimpleQueue[TopicPartition] = queue.SimpleQueue()
        self._waiters: dict[bytes, set[ReceiptWaiter]] = {}
        self._assigned: set[int] = set()
        # Per partition, the end of the log as the consumer last fetched it (its cached high
        # watermark, noted by the thread before it hands a drain over): a new waiter takes
        # no record below it. A thread that has fallen behind would otherwise hand a resubmitted
        # intent its older receipt, from before the key changed (an operator resolved it).
        self._log_end: dict[int, int] = {}
        self._lock = threading.Lock()  # waiters
        self._assign_lock = threading.Lock()  # one partition assignment at a time
        self._closed = threading.Event()
        # Set once a partition is asked for (or the hub closes): the thread stops learning
        # the leaders then, so a partition without one does not hold up another's receipts.
        self._wanted = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-receipts", daemon=True)
        self._thread.start()

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(self._assigned)

    def follow(self, key: str, patience_s: float = PATIENCE_S) -> ReceiptWaiter:
        """Start collecting ``key``'s receipts (call before producing the intent). The first
        of a partition asks for its end offset, for ``patience_s`` at most."""
        return self._register(ReceiptWaiter(self, key), patience_s)

    def follow_async(self, key: str, loop: asyncio.AbstractEventLoop,
                     patience_s: float = PATIENCE_S) -> AsyncReceiptWaiter:
        """The same for a coroutine running in ``loop`` (callable from any thread)."""
        return self._register(AsyncReceiptWaiter(self, key, loop), patience_s)

    def _register(self, waiter: W, patience_s: float) -> W:
        if self._closed.is_set():
            raise RuntimeError("the client is closed")
        partition = self._partition_of(waiter.key)
        # At most the log's end now: every record written after this call is at or above it.
        waiter.floor = self._log_end.get(partition, 0)
        with self._lock:
            self._waiters.setdefault(waiter.key.encode("utf-8"), set()).add(waiter)
        try:
            self._read_partition(partition, patience_s)
        except BaseException:
            self.forget(waiter)
            raise
        return waiter

    def forget(self, waiter: ReceiptWaiter) -> None:
        with self._lock:
            waiters = self._waiters.get(waiter.key.encode("utf-8"))
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[waiter.key.encode("utf-8")]

    def _read_partition(self, partition: int, patience_s: float) -> None:
        """Read ``partition`` from its current end, once (later waiters share it)."""
        if partition in self._assigned:
            return
        with self._assign_lock:
            if partition in self._assigned:
                return
            start = self._end_offset(partition, patience_s)
            self._to_assign.put(TopicPartition(self._topic, partition, start))
            self._assigned.add(partition)
            self._wanted.set()

    def _run(self) -> None:
        learn_leaders(self._consumer, self._topic, timeout_s=LEARN_S, stop=self._wanted)
        reading = False  # nothing assigned yet: wait for an assignment, not in a poll
        while not self._closed.is_set():
            try:
                if self._assign_new(wait_s=0.0 if reading else POLL_S):
                    reading = True
                if not reading:
                    continue
                first = self._consumer.poll(POLL_S)
                if first is None:
                    continue
                drain = (first, *self._consumer.consume(DRAIN, timeout=0))
                # Before handing any over: a waiter registered meanwhile skips this drain.
                self._note_log_end({msg.partition() or 0 for msg in drain
                                    if not msg.error()})
                for msg in drain:
                    try:
                        self._hand_over(msg)
                    except Exception:  # a bug must not cost the rest of the drain...
                        logger.exception("receipt not handed over", extra=log_fields(
                            partition=msg.partition(), offset=msg.offset()))
            except KafkaException as exc:  # the client retries by itself; say so, go on
                logger.warning("receipts read error", extra=log_fields(err=str(exc)))
                time.sleep(POLL_S)
            except Exception as exc:  # ...nor the thread: every later submit waits on it
                if self._closed.is_set():  # the consumer was closed under us: stopping
                    return
                logger.warning("receipts thread error", extra=log_fields(err=str(exc)))
                time.sleep(POLL_S)

    def _assign_new(self, wait_s: float) -> bool:
        """Assign the partitions asked for since the last call (waiting up to ``wait_s`` for
        the first); True if there were any."""
        new = []
        try:
            new.append(self._to_assign.get(timeout=wait_s) if wait_s > 0
                       else self._to_assign.get_nowait())
            while True:
                new.append(self._to_assign.get_nowait())
        except queue.Empty:
            pass
        if new:
            try:
                self._consumer.incremental_assign(new)
            except BaseException:
                for tp in new:  # asked for again at the next turn, not lost for good
                    self._to_assign.put(tp)
                raise
        return bool(new)

    def _note_log_end(self, partitions: set[int]) -> None:
        """Remember where the log of each of ``partitions`` ended at the last fetch (no
        request: the consumer's cached high watermark; lower than or equal to the end). The
        latest, not the highest: a log truncated (an unclean leader election) or a topic
        recreated ends lower, and a floor kept above it would hide every new receipt."""
        for partition in partitions:
            _, high = self._consumer.get_watermark_offsets(
                TopicPartition(self._topic, partition), cached=True)
            if high >= 0:  # negative: not known yet
                self._log_end[partition] = high

    def _hand_over(self, msg: Message) -> None:
        if msg.error():
            return
        key = msg.key()
        offset = msg.offset() or 0
        # A floor above the partition's end as last fetched is from before the log ended
        # lower (truncated, or the topic recreated): it holds nothing back any more.
        end = self._log_end.get(msg.partition() or 0, 0)
        with self._lock:
            waiters = tuple(w for w in self._waiters.get(key, ())
                            if offset >= w.floor or end < w.floor) if key is not None else ()
        if not waiters:
            return
        outage = False
        while True:
            try:
                receipt = self._codec.decode(msg.value(), expect=(Receipt,))
                break
            except DecodeError as exc:
                logger.warning("undecodable receipt skipped", extra=log_fields(
                    partition=msg.partition(), offset=msg.offset(), reason=str(exc)))
                return
            except SerdeError as exc:  # the schema registry: this record again, later
                if not outage:
                    outage = True
                    logger.warning("schema registry unavailable; retrying the receipt",
                                   extra=log_fields(partition=msg.partition(),
                                                    offset=msg.offset(), err=str(exc)))
                if self._closed.wait(POLL_S):
                    return
        trace = tracing.of_message(msg)
        for waiter in waiters:
            waiter.deliver(receipt, trace)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._wanted.set()
        self._thread.join(timeout=5 + POLL_S)
        self._consumer.close()
