"""Producing ledger events: Avro-encoded, keyed by operation key, murmur2-partitioned.

Every ledger producer uses librdkafka's ``murmur2_random`` partitioner (librdkafka's default
is CRC32), so one key lands in the same partition number on every ledger topic, whichever
client (Java, librdkafka with murmur2, this one) produced it. Producers are idempotent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from ledger_stream.config import Settings
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Producer
from ledger_stream.kafka.exceptions import DeliveryFailed
from ledger_stream.serde import AvroCodec


class ProducingForbidden(RuntimeError):
    """This process was told never to write to the ledger (``forbid_producing``)."""


_forbidden: str = ""

DELIVER_POLL_S = 0.05  # one poll of ``deliver``'s waiter that serves the reports
# How long the others sleep between looks (woken at once by their report, or to poll in
# turn: a safety net only)
DELIVER_FOLLOW_S = 1.0


class _Waiter:
    """One caller of ``deliver``: its record's report, and what wakes it."""

    __slots__ = ("done", "failed", "wake")

    def __init__(self) -> None:
        self.done = False
        self.failed: list[str] = []
        self.wake = threading.Event()  # its report came, or the polling is its turn


def forbid_producing(reason: str) -> None:
    """From now on every EventProducer of this process refuses to send (for a process that
    must only read, such as ``upgrade-check``'s dry run: its guard even for code that runs
    outside the dry run's context, such as a thread a tool starts itself)."""
    global _forbidden
    _forbidden = reason


def refuse_if_forbidden(what: str) -> None:
    """ProducingForbidden when this process was told never to write to the ledger."""
    if _forbidden:
        raise ProducingForbidden(f"not sending {what}: {_forbidden}")


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        **CLIENT_CONFIG,  # first: the settings below are the ledger's, never a deployment's
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "linger.ms": 5,
        **extra,
    }


class EventProducer:
    """Sends domain events to ledger topics by role ("intents", "attempts", ...).

    Every delivery report is checked: ``flush`` returns only when every send since the last
    flush was acknowledged by the broker, and raises DeliveryFailed when any was not (the
    caller must then not act as if it was: no offset commit, no "submitted").
    """

    def __init__(
        self, settings: Settings, bootstrap: str, codec: AvroCodec | None = None, **extra: Any
    ) -> None:
        self._settings = settings
        self._codec = codec or AvroCodec()
        self._producer = Producer(producer_config(bootstrap, **extra))
        self._failures: list[str] = []
        # (partition, offset) of every acknowledged record, when asked for (track_offsets)
        self.delivered: list[tuple[int, int]] | None = None
        # deliver()'s callers (insertion-ordered) and the one that polls for all of them
        self._waiting: dict[_Waiter, None] = {}
        self._waiting_lock = threading.Lock()
        self._polling = threading.Lock()

    def send(self, role: str, event: Any,
             headers: Sequence[tuple[str, bytes]] = ()) -> None:
        """``headers``: record headers (the trace context, tracing.py)."""
        self.send_raw(role, event.key.encode("utf-8"), self._codec.encode(event),
                      headers=headers)

    def deliver(self, role: str, event: Any, headers: Sequence[tuple[str, bytes]] = (),
                timeout_s: float = 30.0) -> None:
        """Send one event and wait for *its* acknowledgement. Raises DeliveryFailed when it
        was refused or not acknowledged within ``timeout_s``.

        Safe from many threads at once: each waits for its own record's report, so one
        thread never takes another's failure (with ``send`` + ``flush``, a shared failure
        list would let one thread raise for another's record and the other return as if
        its record had been acknowledged; found by the chaos soak's review).
        """
        me = _Waiter()

        def report(error: KafkaError | None, msg: Message) -> None:
            if error is not None:
                me.failed.append(f"{msg.topic()}: {error.str()}")
            me.done = True
            me.wake.set()

        producer = self._open()  # polled below even if close() runs meanwhile
        with self._waiting_lock:
            self._waiting[me] = None
        try:
            self.send_raw(role, event.key.encode("utf-8"), self._codec.encode(event),
                          headers=headers, on_delivery=report, serve_reports=False)
            self._await_report(me, producer, time.monotonic() + timeout_s, timeout_s)
        finally:
            with self._waiting_lock:
                del self._waiting[me]
            self._pass_polling()
        if me.failed:
            raise DeliveryFailed(me.failed[0])

    def _await_report(self, me: _Waiter, producer: Producer, deadline: float,
                      timeout_s: float) -> None:
        """Until ``me``'s report came: one waiter at a time polls, serving every waiter's
        report, and hands the polling on when its own came; the others sleep until theirs
        comes or it is their turn. (Each polling for itself, a report another's poll served
        left its waiter asleep in ``poll`` until that timed out: librdkafka wakes one poller
        per batch of reports. At 64 agents on one client the intent's acknowledgement took
        the poll's whole 50 ms, p50. A poll by a plain ``send`` can still serve the
        poller's own report; it then polls until the next report or DELIVER_POLL_S.)"""
        while not me.done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeliveryFailed(f"not acknowledged after {timeout_s:g} s")
            if not self._polling.acquire(blocking=False):
                me.wake.wait(min(left, DELIVER_FOLLOW_S))
                me.wake.clear()  # its report sets ``done`` first: never lost
                continue
            try:
                while not me.done and (left := deadline - time.monotonic()) > 0:
                    producer.poll(min(left, DELIVER_POLL_S))  # serves the reports
            except KafkaException as exc:
                raise DeliveryFailed(f"producer poll failed: {exc}") from exc
            finally:
                self._polling.release()
                self._pass_polling()

    def _pass_polling(self) -> None:
        """Wake a waiter still waiting, to poll in turn (once nobody polls)."""
        with self._waiting_lock:
            for waiter in self._waiting:
                if not waiter.done:
                    waiter.wake.set()
                    return

    def send_raw(self, role: str, key: bytes | None, value: bytes | None,
                 partition: int | None = None,
                 headers: Sequence[tuple[str, bytes]] = (),
                 on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
                 wait_for_room: bool = True, serve_reports: bool = True) -> None:
        """``partition``: write there, not to the key's partition (Ticks, containment);
        ``on_delivery``: this record's report goes there instead of the shared list;
        ``wait_for_room=False``: a full local queue raises BufferError at once instead of
        waiting for deliveries to drain it (a caller that must not block);
        ``serve_reports=False``: no poll after the send (``deliver``: one waiter polls)."""
        refuse_if_forbidden(f"to {role}")
        producer = self._open()
        topic = self._settings.topic(role)
        extra: dict[str, Any] = {"headers": list(headers)} if headers else {}
        if partition is not None:
            extra["partition"] = partition
        while True:
            try:
                producer.produce(topic, value=value, key=key,
                                 on_delivery=on_delivery or self._report, **extra)
                break
            except BufferError:
                if not wait_for_room:
                    raise
                producer.poll(0.1)  # local queue full: let deliveries drain
        if serve_reports:
            producer.poll(0)

    def _open(self) -> Producer:
        """The Kafka client; RuntimeError once ``close`` released it (a send racing a
        close gets that, not an AttributeError from the missing client)."""
        try:
            return self._producer
        except AttributeError:
            raise RuntimeError("the producer is closed") from None

    def track_offsets(self) -> None:
        """Keep the (partition, offset) of every record acknowledged from now on."""
        self.delivered = []

    def _report(self, error: KafkaError | None, msg: Message) -> None:
        if error is not None:
            self._failures.append(f"{msg.topic()}: {error.str()}")
        elif self.delivered is not None:
            self.delivered.append((int(msg.partition() or 0), int(msg.offset() or 0)))

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every send to be acknowledged. Raises DeliveryFailed when a send was
        refused or not acknowledged within ``timeout_s``; the failures are then cleared."""
        try:
            left = self._open().flush(timeout_s)
        except KafkaException as exc:
            raise DeliveryFailed(f"producer flush failed: {exc}") from exc
        failures, self._failures = self._failures, []
        if left:
            failures.append(f"{left} events not acknowledged after {timeout_s} s")
        if failures:
            raise DeliveryFailed("; ".join(failures[:5]))

    def close(self, timeout_s: float = 30.0) -> None:
        """Flush, then release the client (librdkafka closes its connections). Once."""
        if not hasattr(self, "_producer"):
            return
        self.flush(timeout_s)
        del self._producer
