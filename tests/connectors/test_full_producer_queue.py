"""A call's outcome that meets a full producer queue on the thread the call ended on
(connector/runtime.py ``_complete``): that thread (a pool thread, or the HTTP target's
exchange loop for every call it carries) holds the worker's lock, which the main loop needs
to poll the producer, the only thing that empties the queue. Waiting there for room stalled
both: the exchange loop read no other answer, the main loop fed nothing and saw no SIGTERM,
for as long as the brokers took. Now the outcome is handed to the main loop, which produces
it after polling: once, never lost.

The producer is a fake behind the worker's ``producer`` parameter (the interface a CPU
harness drives the loop through); the HTTP calls are real, against a local server."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pytest

from connectors.http import HttpTarget
from ledger_stream import tracing
from ledger_stream.connector import runtime
from ledger_stream.connector.commands import Call, Command, Commit, Produce
from ledger_stream.connector.memory import MemoryTarget
from ledger_stream.connector.target import EffectRequest, Target
from ledger_stream.domain import events as ev
from ledger_stream.serde import AvroCodec
from tests.connectors.raw_server import RawServer, requests_on

pytestmark = pytest.mark.timeout(60)

STALL_S = 3.0  # far more than a completion takes; the old code waited for the brokers


class FullQueue:
    """A producer whose local queue is full until ``drain`` is set (the brokers answer
    again), after which a poll serves the deliveries and makes room."""

    def __init__(self) -> None:
        self.room = 0
        self.drain = threading.Event()
        self.sent: list[bytes] = []
        self.polled_on: list[int] = []

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any,
                headers: Any = None) -> None:
        if self.room == 0:
            raise BufferError("Local: Queue full")
        self.room -= 1
        self.sent.append(value)

    def poll(self, timeout: float = 0.0) -> int:
        self.polled_on.append(threading.get_ident())
        if self.drain.is_set():
            self.room = 100
        else:
            time.sleep(min(timeout, 0.05))
        return 0


class Outcomes:
    """The core's side: each call's outcome becomes one Produce, as ``called`` does."""

    def __init__(self) -> None:
        self.reported: queue.SimpleQueue[tuple[int, ev.OutcomeStatus]] = queue.SimpleQueue()

    def called(self, job_id: int, status: ev.OutcomeStatus, external_id: str, error: str,
               now_ms: int) -> list[Command]:
        self.reported.put((job_id, status))
        return [Produce(job_id, ev.AttemptOutcome(f"o{job_id}", f"acme/pay/k{job_id}", 1,
                                                  f"c{job_id}", status, now_ms, external_id))]


def worker(target: Target, producer: FullQueue) -> tuple[runtime.ConnectorWorker, Outcomes]:
    """The parts of a worker its calls use; the test's thread plays the main loop."""
    w = runtime.ConnectorWorker.__new__(runtime.ConnectorWorker)
    core = Outcomes()
    w._target, w._core = target, core  # type: ignore[assignment]
    w._producer = producer  # type: ignore[assignment]
    w._codec, w._attempts = AvroCodec(), "ledger.attempts"
    w._done = queue.SimpleQueue()
    w._lock, w._loop_thread = threading.RLock(), threading.get_ident()
    w._traces, w._traces_lock = {}, threading.Lock()
    w._stopping, w._asked = threading.Event(), {}
    return w, core


def run_loop_once(w: runtime.ConnectorWorker) -> None:
    """What the main loop's pass does with the completions left to it."""
    with w._lock:
        while not w._done.empty():
            w._execute(w._done.get_nowait()())


def call(job_id: int, timeout_s: float = 5.0) -> Call:
    return Call(job_id, EffectRequest(f"acme/pay/k{job_id}", 1, f"c{job_id}", "pay",
                                      {"amount": 1}, "h"), timeout_s, 0)


def test_an_outcome_that_meets_a_full_queue_is_left_to_the_loop_which_produces_it_once(
) -> None:
    producer = FullQueue()
    w, core = worker(MemoryTarget(), producer)
    ended = threading.Thread(target=w._call, args=(call(1),), daemon=True)  # a pool thread
    try:
        ended.start()
        ended.join(STALL_S)
        assert not ended.is_alive(), "the call's thread waits for room in the queue"
        assert w._lock.acquire(timeout=1), "the call's thread holds the loop's lock"
        w._lock.release()
        assert core.reported.get(timeout=1) == (1, ev.OutcomeStatus.SUCCEEDED)
        assert producer.sent == [] and not w._done.empty()  # handed over, not produced
        assert threading.get_ident() not in producer.polled_on
        producer.drain.set()  # the brokers answer again
        run_loop_once(w)
    finally:
        producer.drain.set()  # (the old code's thread ends once there is room)
    assert len(producer.sent) == 1  # exactly once
    assert w._codec.decode(producer.sent[0]).claim_id == "c1"
    assert threading.get_ident() in producer.polled_on  # the loop polled to make room


class Api:
    """Answers every request at once with a receipt naming its idempotency key."""

    def __init__(self) -> None:
        self._server = RawServer(self._serve)
        self.url = self._server.url

    def _serve(self, conn: Any, stop: threading.Event) -> None:
        with conn:
            for headers in requests_on(conn, stop):
                body = f'{{"id": "pay-{headers.get("Idempotency-Key", "")}"}}'.encode()
                conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                             + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    def close(self) -> None:
        self._server.close()


def test_the_exchange_loop_reads_other_answers_while_the_queue_is_full(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls carried by the HTTP target's exchange loop: the first outcome meets a full
    queue on the loop's thread; the second call's answer is still read and reported."""
    monkeypatch.setattr(tracing, "installed", lambda: False)
    api, producer = Api(), FullQueue()
    target = HttpTarget("t", api.url)
    try:
        warm = [threading.Thread(target=target.apply, args=(call(90 + i).request, 2.0))
                for i in range(2)]  # two kept connections: both calls go to the loop
        for thread in warm:
            thread.start()
        for thread in warm:
            thread.join()
        w, core = worker(target, producer)
        w._start_call(call(1))
        assert core.reported.get(timeout=5) == (1, ev.OutcomeStatus.SUCCEEDED)
        w._start_call(call(2))
        try:
            second = core.reported.get(timeout=STALL_S)
        except queue.Empty:
            pytest.fail("the exchange loop read no answer while an outcome waited for room")
        assert second == (2, ev.OutcomeStatus.SUCCEEDED)
        assert producer.sent == []
        producer.drain.set()
        run_loop_once(w)
        assert sorted(w._codec.decode(v).claim_id for v in producer.sent) == ["c1", "c2"]
    finally:
        producer.drain.set()
        target.close()
        api.close()


def test_an_outcome_left_to_the_loop_that_cannot_be_produced_stops_the_connector() -> None:
    """As when the loop produces it in the first place: the error is raised on the loop
    (the connector stops), not lost on the call's thread."""
    from confluent_kafka import KafkaError, KafkaException

    class Refusing(FullQueue):
        def produce(self, *args: Any, **kwargs: Any) -> None:
            if threading.get_ident() == w._loop_thread:
                raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"))
            super().produce(*args, **kwargs)

    w, core = worker(MemoryTarget(), Refusing())
    ended = threading.Thread(target=w._call, args=(call(3),), daemon=True)
    ended.start()
    ended.join(STALL_S)
    assert not ended.is_alive() and core.reported.get(timeout=1)[0] == 3
    with pytest.raises(KafkaException, match="too large"):
        run_loop_once(w)


class Acknowledging(FullQueue):
    """A full queue whose deliveries, once the brokers answer, are acknowledged by a poll
    (or a flush), as librdkafka's are."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[Any] = []

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any,
                headers: Any = None) -> None:
        super().produce(topic, value, key, on_delivery, headers)
        self.reports.append(on_delivery)

    def poll(self, timeout: float = 0.0) -> int:
        super().poll(timeout)
        if self.drain.is_set():
            reports, self.reports = self.reports, []
            for report in reports:
                report(None, None)
        return 0

    def flush(self, timeout: float = 0.0) -> int:
        self.poll(0)
        return len(self.reports)


class Stopping(Outcomes):
    """The core's side for a stop: idle once every outcome is acknowledged, each of which
    lets its record be committed."""

    stopped = ""
    closing = False

    def __init__(self) -> None:
        super().__init__()
        self.waiting: set[int] = set()

    def called(self, job_id: int, status: ev.OutcomeStatus, external_id: str, error: str,
               now_ms: int) -> list[Command]:
        self.waiting.add(job_id)
        return super().called(job_id, status, external_id, error, now_ms)

    def produced(self, job_id: int, ok: bool, now_ms: int, error: str = "") -> list[Command]:
        self.waiting.discard(job_id)
        return [Commit(0, job_id + 1)]

    def shutdown(self, now_ms: int) -> list[Command]:
        self.closing = True
        return []

    def tick(self, now_ms: int) -> list[Command]:
        return []

    def idle(self) -> bool:
        return not self.waiting


class Feed:
    def __init__(self) -> None:
        self.committed: list[dict[int, int]] = []

    def poll(self, timeout_s: float) -> list[Any]:
        time.sleep(timeout_s)
        return []

    def commit(self, offsets: dict[int, int], wait: bool = False) -> None:
        if offsets:
            self.committed.append(dict(offsets))


def test_a_stop_produces_an_outcome_left_to_the_loop_once_and_calls_nothing_again() -> None:
    """SIGTERM while an outcome waits for room: the stop's drain produces it once the
    brokers answer, commits its record after its acknowledgement, and never calls the
    target again (a call is only ever started from the claim's answer)."""
    producer, target = Acknowledging(), MemoryTarget()
    w, core = worker(target, producer)
    w._core = Stopping()  # type: ignore[assignment]
    w._feed, w._to_commit = Feed(), {}  # type: ignore[assignment]
    w._opts = runtime.ConnectorOptions(call_timeout_s=1.0, record_margin_s=0.5)
    ended = threading.Thread(target=w._call, args=(call(5),), daemon=True)
    ended.start()
    ended.join(STALL_S)
    assert not ended.is_alive() and producer.sent == [] and not w._done.empty()
    threading.Timer(0.3, producer.drain.set).start()  # the brokers answer during the stop
    w._drain()
    assert [w._codec.decode(v).claim_id for v in producer.sent] == ["c5"]
    assert len(target.calls) == 1
    assert w._feed.committed[-1] == {0: 6}  # type: ignore[attr-defined]


def test_commands_after_a_produce_left_to_the_loop_follow_it_once_and_in_order() -> None:
    """A completion whose Produce meets a full queue may carry more commands (a lookup
    given up starts the next keys' claims; a record found handled commits its offset):
    none runs before it, and each runs once, in order, after it."""

    class More(Outcomes):
        def called(self, job_id: int, status: ev.OutcomeStatus, external_id: str,
                   error: str, now_ms: int) -> list[Command]:
            first = super().called(job_id, status, external_id, error, now_ms)
            claim = ev.AttemptClaim("e2", "acme/pay/k2", 1, "c2", "i", 1000, now_ms)
            return [*first, Produce(2, claim), Commit(0, 9)]

    producer = FullQueue()
    w, _ = worker(MemoryTarget(), producer)
    w._core, w._to_commit = More(), {}  # type: ignore[assignment]
    ended = threading.Thread(target=w._call, args=(call(1),), daemon=True)
    ended.start()
    ended.join(STALL_S)
    assert not ended.is_alive()
    assert producer.sent == [] and w._to_commit == {}  # nothing ran ahead of the outcome
    producer.drain.set()
    run_loop_once(w)
    assert [w._codec.decode(v).claim_id for v in producer.sent] == ["c1", "c2"]
    assert w._to_commit == {0: 9}
