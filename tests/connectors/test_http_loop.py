"""Calls run by the HTTP target's exchange loop (connectors/http_loop.py, through
``HttpTarget.start_apply``) against a real local server (no broker): the same outcomes as a
call on a thread, and the deadlines of finished calls let go.

The server answers each request with a receipt naming its own idempotency key, and does
to the N-th request (counted from 1) or to the request with a given key what a test asks:
answer in two pieces, never answer, hang up after reading it, or answer with garbage. A test
with requests on two connections at once names the key: which connection's thread counts
its request first is up to the scheduler.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from connectors import http_exchange
from connectors.http import HttpTarget
from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain.events import OutcomeStatus
from tests.connectors.raw_server import RawServer, requests_on

pytestmark = pytest.mark.timeout(30)


def effect(key: str) -> EffectRequest:
    return EffectRequest(key, 1, f"claim-{key}", "refund", {"amount": 1}, "hash")


class Api:
    """Keep-alive HTTP/1.1; ``odd`` maps a request number or an idempotency key to what
    happens to that request."""

    def __init__(self, odd: dict[int | str, str] | None = None) -> None:
        self.odd = odd or {}
        self.requests: list[tuple[int, str]] = []  # (connection number, idempotency key)
        self.connections = 0
        self._lock = threading.Lock()
        self._server = RawServer(self._serve)
        self.url = self._server.url

    def _serve(self, conn: socket.socket, stop: threading.Event) -> None:
        with self._lock:
            self.connections += 1
            number = self.connections
        with conn:
            for headers in requests_on(conn, stop):
                key = headers.get("Idempotency-Key", "")
                with self._lock:
                    self.requests.append((number, key))
                    what = self.odd.get(key) or self.odd.get(len(self.requests), "")
                body = f'{{"id": "pay-{key}"}}'.encode()
                answer = (b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                          + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                if what == "hang up":
                    return
                if what == "silent":
                    stop.wait(20)
                    return
                if what == "garbage":
                    conn.sendall(b"HTTP/1.1 2x0 Secret-Card-4242\r\n\r\n")
                    return
                if what == "split":
                    conn.sendall(answer[:30])
                    time.sleep(0.2)
                    conn.sendall(answer[30:])
                    continue
                conn.sendall(answer)

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def apis() -> Iterator[list[Api]]:
    started: list[Api] = []
    yield started
    for api in started:
        api.close()


def serve(apis: list[Api], odd: dict[int | str, str] | None = None) -> Api:
    apis.append(Api(odd))
    return apis[-1]


class Done:
    """``start_apply``'s ``done``: what it was called with, and how often."""

    def __init__(self) -> None:
        self.results: queue.SimpleQueue[tuple[str, Exception | None]] = queue.SimpleQueue()
        self.calls = 0

    def __call__(self, receipt: str, error: Exception | None) -> None:
        self.calls += 1
        self.results.put((receipt, error))

    def get(self) -> tuple[str, Exception | None]:
        return self.results.get(timeout=10)


def kept(api: Api) -> HttpTarget:
    """A target with one kept connection to ``api`` (request 1 made it)."""
    target = HttpTarget("t", api.url)
    assert target.apply(effect("acme/refund/0"), timeout_s=2.0) == "pay-acme/refund/0"
    return target


def test_a_call_on_a_kept_connection_is_run_by_the_loop(apis):
    api = serve(apis)
    target = kept(api)
    for i in range(1, 4):
        done = Done()
        assert target.start_apply(effect(f"acme/refund/{i}"), 2.0, done)
        assert done.get() == (f"pay-acme/refund/{i}", None)
    assert api.connections == 1
    assert [key for _, key in api.requests] == [f"acme/refund/{i}" for i in range(4)]


def test_without_a_kept_connection_nothing_is_started_or_sent(apis):
    api = serve(apis)
    target, done = HttpTarget("t", api.url), Done()
    assert not target.start_apply(effect("acme/refund/1"), 2.0, done)
    time.sleep(0.2)
    assert api.requests == [] and done.calls == 0


def test_an_answer_in_two_pieces_is_read_whole(apis):
    api = serve(apis, {2: "split"})
    target, done = kept(api), Done()
    assert target.start_apply(effect("acme/refund/1"), 2.0, done)
    assert done.get() == ("pay-acme/refund/1", None)
    done = Done()
    assert target.start_apply(effect("acme/refund/2"), 2.0, done)  # still kept
    assert done.get() == ("pay-acme/refund/2", None)
    assert api.connections == 1


@pytest.mark.parametrize("odd", ["hang up", "silent", "garbage"])
def test_a_call_that_went_out_and_got_no_answer_is_unknown_and_its_connection_dropped(
        apis, odd):
    api = serve(apis, {2: odd})
    target, done = kept(api), Done()
    started = time.monotonic()
    assert target.start_apply(effect("acme/refund/1"), 1.0, done)
    receipt, error = done.get()
    assert time.monotonic() - started < 2.5, "the call outlived its deadline"
    assert receipt == "" and error is not None
    assert target.classify(error) is OutcomeStatus.UNKNOWN  # it may have been applied
    assert "after sending POST /v1/payments" in str(error)
    assert "Secret" not in str(error) and "4242" not in str(error)  # the server's text
    assert done.calls == 1
    assert target.apply(effect("acme/refund/2"), timeout_s=2.0) == "pay-acme/refund/2"
    assert api.connections == 2  # the failed connection was not used again


def test_a_request_refused_before_sending_is_left_to_apply(apis):
    api = serve(apis)
    target, done = kept(api), Done()
    bad = EffectRequest("acme/refund/1\r\nX-Injected: 1", 1, "c", "refund", {}, "h")
    assert not target.start_apply(bad, 2.0, done)
    with pytest.raises(Exception) as raised:
        target.apply(bad, 2.0)
    assert target.classify(raised.value) is OutcomeStatus.NOT_APPLIED
    assert len(api.requests) == 1 and done.calls == 0


def test_finished_calls_leave_no_deadline_behind_in_the_loop(apis):
    # Each call's deadline is 20 s away, behind a call still waiting (10 s): kept until
    # their deadlines, they would pile up with the rate of calls.
    api = serve(apis, {"acme/refund/1": "silent"})
    target, waiting = kept(api), Done()
    assert target.start_apply(effect("acme/refund/1"), 10.0, waiting)  # its only connection
    assert target.apply(effect("acme/refund/2"), timeout_s=2.0) == "pay-acme/refund/2"
    for i in range(3, 203):
        done = Done()
        assert target.start_apply(effect(f"acme/refund/{i}"), 20.0, done)
        assert done.get()[1] is None
    assert target._loop.watched() < 100
    assert waiting.calls == 0


def test_finished_calls_leave_no_deadline_behind_on_the_thread_path(apis):
    api = serve(apis)
    target = kept(api)
    before = len(http_exchange.DEADLINES)
    for i in range(1, 201):
        assert target.apply(effect(f"acme/refund/{i}"), timeout_s=30.0) == f"pay-acme/refund/{i}"
    assert len(http_exchange.DEADLINES) - before < 100


def test_calls_in_flight_at_once_each_get_their_own_answer(apis):
    api = serve(apis)
    target = HttpTarget("t", api.url)
    warm = [threading.Thread(target=target.apply, args=(effect(f"acme/warm/{i}"), 2.0))
            for i in range(8)]
    for thread in warm:
        thread.start()
    for thread in warm:
        thread.join()
    dones = {}
    for i in range(8):
        dones[i] = Done()
        if not target.start_apply(effect(f"acme/refund/{i}"), 5.0, dones[i]):
            dones[i](target.apply(effect(f"acme/refund/{i}"), 5.0), None)
    assert {i: d.get() for i, d in dones.items()} == {
        i: (f"pay-acme/refund/{i}", None) for i in range(8)}


def test_close_refuses_new_calls(apis):
    api = serve(apis)
    target = kept(api)
    target.close()
    assert not target.start_apply(effect("acme/refund/1"), 2.0, Done())


def test_a_sooner_deadline_is_kept_while_the_loop_waits_for_a_later_one(apis):
    api = serve(apis, {"acme/refund/1": "silent", "acme/refund/3": "silent"})
    target, later, sooner = kept(api), Done(), Done()
    assert target.start_apply(effect("acme/refund/1"), 10.0, later)  # the loop waits for it
    assert target.apply(effect("acme/refund/2"), timeout_s=2.0) == "pay-acme/refund/2"
    started = time.monotonic()
    assert target.start_apply(effect("acme/refund/3"), 0.3, sooner)
    receipt, error = sooner.get()
    assert time.monotonic() - started < 1.0, "cut at the later deadline, not its own"
    assert target.classify(error) is OutcomeStatus.UNKNOWN
    assert "Deadline after sending" in str(error) and later.calls == 0


# --- over TLS: the loop reads what the TLS layer has decrypted, and waits for the rest ------


@pytest.fixture
def tls(tmp_path, monkeypatch):
    """A self-signed certificate for 127.0.0.1 (openssl), trusted by the client side."""
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    monkeypatch.setattr(ssl, "_create_default_https_context",
                        lambda: ssl.create_default_context(cafile=str(cert)))
    return server


class TlsApi(Api):
    def __init__(self, context, odd: dict[int | str, str] | None = None) -> None:
        self._context = context
        super().__init__(odd)
        self.url = self.url.replace("http://", "https://")

    def _serve(self, conn: socket.socket, stop: threading.Event) -> None:
        try:
            wrapped = self._context.wrap_socket(conn, server_side=True)
        except OSError:
            return
        super()._serve(wrapped, stop)


def test_calls_over_tls_are_run_by_the_loop_with_the_same_outcomes(apis, tls):
    api = TlsApi(tls, {3: "split", 5: "hang up"})
    apis.append(api)
    target = kept(api)
    for i in range(1, 4):  # requests 2, 3 (in two pieces), 4
        done = Done()
        assert target.start_apply(effect(f"acme/refund/{i}"), 5.0, done)
        assert done.get() == (f"pay-acme/refund/{i}", None)
    assert api.connections == 1
    done = Done()
    assert target.start_apply(effect("acme/refund/4"), 5.0, done)  # request 5: no answer
    receipt, error = done.get()
    assert receipt == "" and target.classify(error) is OutcomeStatus.UNKNOWN


# --- the loop's own end, and its deadline heap -------------------------------------------------


class HeldSocket:
    """A real socket whose first ``send`` waits until ``go`` is set."""

    def __init__(self, real: socket.socket) -> None:
        self.real, self.entered, self.go = real, threading.Event(), threading.Event()

    def fileno(self) -> int:
        return self.real.fileno()

    def gettimeout(self) -> float:
        return 0.0

    def send(self, data: bytes) -> int:
        self.entered.set()
        assert self.go.wait(5)
        return self.real.send(data)

    def close(self) -> None:
        self.real.close()


class HeldConnection:
    def __init__(self, sock: HeldSocket) -> None:
        self.sock: HeldSocket | None = sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class Dying:
    """The loop's epoll, whose wait now fails: the loop's thread dies."""

    def __init__(self, real: object) -> None:
        self.real = real

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        raise RuntimeError("the loop's thread dies")

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_flight_being_written_as_the_loop_dies_is_finished_once_and_unknown():
    """The loop's end cut every flight it held, one still being written by ``start`` too:
    that one was reported at the cut and again when its write ended, and reported NotSent
    if cut before ``sending`` was set, as its first byte could still leave."""
    from connectors.http_loop import Ambiguous, ExchangeLoop, Flight

    ours, theirs = socket.socketpair()
    held = HeldSocket(ours)
    results: list[object] = []
    flight = Flight(HeldConnection(held), b"GET / HTTP/1.1\r\n\r\n", "GET",  # type: ignore
                    "GET /", 5.0, 1000, results.append, lambda *_: None, lambda _: 1.0)
    loop = ExchangeLoop("dying")
    writer = threading.Thread(target=loop.start, args=(flight,))
    writer.start()
    assert held.entered.wait(5)
    loop._epoll = Dying(loop._epoll)  # type: ignore[assignment]
    assert loop._thread is not None
    loop._thread.join(5)
    assert not loop._thread.is_alive()
    held.go.set()
    writer.join(5)
    assert len(results) == 1, results
    assert isinstance(results[0], Ambiguous)
    theirs.close()


class Item:
    def __init__(self) -> None:
        self.ended = False


def test_the_deadline_heap_counts_only_its_own_entries_of_ended_items():
    """An item cut at its deadline (taken out by ``due``), one that failed before it was
    pushed, or one discarded twice left a count the heap did not hold: the count ran ahead
    and rebuilt the heap more and more often."""
    from connectors.http_deadlines import DeadlineHeap

    heap: DeadlineHeap[Item] = DeadlineHeap()
    items = [Item() for _ in range(10)]
    for at, item in enumerate(items):
        heap.push(float(at), item)
    [cut] = heap.due(0.0)  # taken out at its deadline, then ended
    cut.ended = True
    heap.discard(cut)
    never = Item()  # failed as it started: never pushed
    never.ended = True
    heap.discard(never)
    items[5].ended = True
    heap.discard(items[5])
    heap.discard(items[5])  # a second report of its end
    assert heap._dead == 1 == sum(1 for item in items[1:] if item.ended)
    items[1].ended = True  # ended, not yet discarded: dropped from the top first
    assert heap.next_at() == 2.0
    heap.discard(items[1])
    assert heap._dead == 1
    assert heap.due(9.0) == [item for item in items[2:] if not item.ended]
    assert heap._dead == 0 and len(heap) == 0


def test_an_item_that_ended_before_it_was_pushed_is_not_held() -> None:
    """The loop read a call's answer (and discarded it, uncounted: not in the heap yet)
    before the calling thread pushed its deadline: pushed anyway, its entry was dead and
    never counted, so nothing pruned it (CI saw 201 entries after 200 calls)."""
    from connectors.http_deadlines import DeadlineHeap

    heap: DeadlineHeap[Item] = DeadlineHeap()
    early = Item()
    early.ended = True
    heap.discard(early)
    heap.push(1.0, early)
    assert len(heap) == 0 and heap._dead == 0
