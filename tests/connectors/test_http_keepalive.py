"""Kept-alive connections of the HTTP connector against a real local server (no broker).

The server counts its TCP connections and records which request came on which, and it
answers each request with a receipt naming that request's own idempotency key, so every
assertion is on what the server saw and on answers only the right request could carry.
"""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

import connectors.http_exchange as http_exchange
from connectors.http import HttpTarget
from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain.events import OutcomeStatus
from tests.connectors.raw_server import RawServer

pytestmark = pytest.mark.timeout(30)


def effect(key: str) -> EffectRequest:
    return EffectRequest(key, 1, f"claim-{key}", "refund", {"amount": 1}, "hash")


def _read_request(conn: socket.socket, buffer: bytes) -> tuple[dict[str, str], bytes] | None:
    """(headers, what is left of the buffer) or None at end of stream."""
    while b"\r\n\r\n" not in buffer:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    headers = {}
    for line in head.decode().split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        rest += chunk
    return headers, rest[length:]


class KeepAliveApi:
    """HTTP/1.1 with keep-alive. ``close_idle_after_s``: close a connection that long after
    each answer (a server's idle timeout, sent as nothing but the end of the stream);
    ``trickle_first``: the first request's answer comes one byte every 0.2 s; ``big_body``:
    answers carry this many extra bytes; ``close_header``: answers say Connection: close;
    ``interim_first``: the first answer is ``102 Processing``, its final answer 0.3 s later;
    ``keep_alive``: the value of a Keep-Alive header on every answer; ``trickle_on``: the
    answer to that request (counted from 1) trickles as the first does with
    ``trickle_first``."""

    def __init__(self, close_idle_after_s: float | None = None, trickle_first: bool = False,
                 big_body: int = 0, close_header: bool = False, interim_first: bool = False,
                 keep_alive: str = "", trickle_on: int = 0) -> None:
        self.close_idle_after_s, self.trickle_first = close_idle_after_s, trickle_first
        self.trickle_on = 1 if trickle_first else trickle_on
        self.big_body, self.close_header = big_body, close_header
        self.interim_first, self.keep_alive = interim_first, keep_alive
        self.requests: list[tuple[int, str]] = []  # (connection number, idempotency key)
        self.connections = 0
        self.ended: list[int] = []  # connections whose client closed them
        self.server_closed: list[int] = []  # connections this server closed when idle
        self._lock = threading.Lock()
        self._server = RawServer(self._accepted)
        self._stop, self.url = self._server.stop, self._server.url

    def _accepted(self, conn: socket.socket, stop: threading.Event) -> None:
        with self._lock:
            self.connections += 1
            number = self.connections
        self._serve(conn, number)

    def _serve(self, conn: socket.socket, number: int) -> None:
        buffer = b""
        with conn:
            while not self._stop.is_set():
                try:
                    request = _read_request(conn, buffer)
                except OSError:
                    return
                if request is None:
                    with self._lock:
                        self.ended.append(number)
                    return
                headers, buffer = request
                key = headers.get("idempotency-key", "")
                with self._lock:
                    self.requests.append((number, key))
                    first = len(self.requests) == 1
                    trickled = len(self.requests) == self.trickle_on
                body = f'{{"id": "pay-{key}", "pad": "{"x" * self.big_body}"}}'.encode()
                answer = (b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                          + (b"Connection: close\r\n" if self.close_header else b"")
                          + (f"Keep-Alive: {self.keep_alive}\r\n".encode()
                             if self.keep_alive else b"")
                          + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                try:
                    if first and self.interim_first:
                        conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")
                        time.sleep(0.3)
                    if trickled:
                        for byte in answer:
                            if self._stop.wait(0.2):
                                return
                            conn.sendall(bytes([byte]))
                        return
                    conn.sendall(answer)
                except OSError:
                    return
                if self.close_header:
                    return
                if self.close_idle_after_s is not None:
                    time.sleep(self.close_idle_after_s)
                    conn.close()  # the client's kept connection now reads end of stream
                    with self._lock:
                        self.server_closed.append(number)
                    return

    def saw_end_of(self, number: int, timeout_s: float = 2.0) -> bool:
        """Whether the client closed connection ``number`` within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while number not in self.ended and time.monotonic() < deadline:
            time.sleep(0.02)
        return number in self.ended

    def closed_by_server(self, number: int, timeout_s: float = 10.0) -> bool:
        """Whether this server closed connection ``number`` within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while number not in self.server_closed and time.monotonic() < deadline:
            time.sleep(0.02)
        return number in self.server_closed

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def servers() -> Iterator[list[KeepAliveApi]]:
    started: list[KeepAliveApi] = []
    yield started
    for server in started:
        server.close()


def serve(servers: list[KeepAliveApi], **kwargs: object) -> KeepAliveApi:
    servers.append(KeepAliveApi(**kwargs))  # type: ignore[arg-type]
    return servers[-1]


def test_calls_in_a_row_share_one_connection(servers):
    api = serve(servers)
    target = HttpTarget("t", api.url)
    for i in range(3):
        assert target.apply(effect(f"acme/refund/{i}"), timeout_s=2.0) == f"pay-acme/refund/{i}"
    assert target.lookup("acme/refund/9", timeout_s=2.0) == "pay-"  # a GET has no key header
    assert api.connections == 1
    assert [n for n, _ in api.requests] == [1, 1, 1, 1]


def test_a_connection_the_server_closed_while_idle_is_not_used(servers):
    # Sent on it, the request would meet the closed stream: an unknown outcome for a call
    # that never reached the server.
    api = serve(servers, close_idle_after_s=0.05)
    target = HttpTarget("t", api.url)
    assert target.apply(effect("acme/refund/1"), timeout_s=2.0) == "pay-acme/refund/1"
    assert api.closed_by_server(1)  # waited for, not slept: a slow server thread is later
    time.sleep(0.05)  # the FIN reaches the client's socket (loopback)
    assert target.apply(effect("acme/refund/2"), timeout_s=2.0) == "pay-acme/refund/2"
    assert api.connections == 2
    assert api.requests == [(1, "acme/refund/1"), (2, "acme/refund/2")]


def test_a_connection_idle_too_long_is_closed_not_used(servers, monkeypatch):
    monkeypatch.setattr(http_exchange, "KEEP_IDLE_S", 0.1)
    api = serve(servers)
    target = HttpTarget("t", api.url)
    target.apply(effect("acme/refund/1"), timeout_s=2.0)
    time.sleep(0.3)
    assert target.apply(effect("acme/refund/2"), timeout_s=2.0) == "pay-acme/refund/2"
    assert api.connections == 2
    assert api.saw_end_of(1)  # the stale one was closed, not left open


def test_a_connection_cut_at_the_deadline_is_never_used_again(servers):
    # The first answer still trickles in: a kept connection would hand its bytes to the
    # next call as that call's answer.
    api = serve(servers, trickle_first=True)
    target = HttpTarget("t", api.url)
    with pytest.raises(Exception) as raised:
        target.apply(effect("acme/refund/1"), timeout_s=0.5)
    assert target.classify(raised.value) is OutcomeStatus.UNKNOWN
    assert target.apply(effect("acme/refund/2"), timeout_s=2.0) == "pay-acme/refund/2"
    assert api.connections == 2


def test_a_trickled_answer_on_a_kept_connection_is_cut_at_the_deadline(servers):
    # A kept connection's I/O runs in the caller's thread: the deadline thread cuts it.
    api = serve(servers, trickle_on=2)
    target = HttpTarget("t", api.url)
    assert target.apply(effect("acme/refund/1"), timeout_s=2.0) == "pay-acme/refund/1"
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        target.apply(effect("acme/refund/2"), timeout_s=1.0)
    assert time.monotonic() - started < 2.5, "the call outlived its deadline"
    assert target.classify(raised.value) is OutcomeStatus.UNKNOWN
    # The deadline thread's cut, or the socket's own timeout (the time left) just before it.
    assert "after sending POST /v1/payments" in str(raised.value)
    assert target.apply(effect("acme/refund/3"), timeout_s=2.0) == "pay-acme/refund/3"
    assert api.connections == 2  # the cut one was not used again


def test_a_call_on_a_kept_connection_starts_no_thread(servers, monkeypatch):
    # A thread per call cost more of the connector's CPU than the call's own I/O.
    api = serve(servers)
    target = HttpTarget("t", api.url)
    assert target.apply(effect("acme/refund/0"), timeout_s=2.0) == "pay-acme/refund/0"
    started: list[str] = []
    real_start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    for i in range(1, 6):
        assert target.apply(effect(f"acme/refund/{i}"), timeout_s=2.0) == f"pay-acme/refund/{i}"
    assert api.connections == 1
    assert [name for name in started if name == "http-call"] == []


def test_a_response_not_read_to_its_end_is_not_kept(servers, monkeypatch):
    monkeypatch.setattr(http_exchange, "MAX_RESPONSE_BYTES", 64)
    api = serve(servers, big_body=200)
    target = HttpTarget("t", api.url)
    with pytest.raises(Exception) as raised:
        target.apply(effect("acme/refund/1"), timeout_s=2.0)
    assert target.classify(raised.value) is OutcomeStatus.UNKNOWN  # a cut body: no receipt
    monkeypatch.setattr(http_exchange, "MAX_RESPONSE_BYTES", 1 << 20)
    assert target.apply(effect("acme/refund/2"), timeout_s=2.0) == "pay-acme/refund/2"
    assert api.connections == 2


def test_an_answer_saying_connection_close_is_not_kept(servers):
    api = serve(servers, close_header=True)
    target = HttpTarget("t", api.url)
    for i in range(2):
        assert target.apply(effect(f"acme/refund/{i}"), timeout_s=2.0) == f"pay-acme/refund/{i}"
    assert api.connections == 2


def test_concurrent_calls_each_get_their_own_answer(servers):
    api = serve(servers)
    target = HttpTarget("t", api.url)
    keys = [f"acme/refund/{i}" for i in range(80)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda k: target.apply(effect(k), timeout_s=5.0), keys))
    assert answers == [f"pay-{k}" for k in keys]
    assert sorted(k for _, k in api.requests) == sorted(keys)
    assert api.connections <= 8 + 1  # kept and used again, never one per call


def test_close_ends_the_kept_connections(servers):
    api = serve(servers)
    target = HttpTarget("t", api.url)
    target.apply(effect("acme/refund/1"), timeout_s=2.0)
    target.close()
    assert api.saw_end_of(1)
    assert api.ended == [1]


def test_an_interim_answer_never_leaves_its_connection_to_the_next_call(servers):
    # http.client takes 102 for the final answer; kept, the connection would hand the real
    # answer of the first call (0.3 s later) to the second as its own.
    api = serve(servers, interim_first=True)
    target = HttpTarget("t", api.url)
    with pytest.raises(Exception) as raised:
        target.apply(effect("acme/refund/1"), timeout_s=2.0)
    assert target.classify(raised.value) is OutcomeStatus.UNKNOWN
    # At once: the first call's final answer is still on its way, unseen by a check.
    assert target.apply(effect("acme/refund/2"), timeout_s=2.0) == "pay-acme/refund/2"
    assert api.connections == 2


def test_the_servers_keep_alive_timeout_shortens_the_wait(servers):
    api = serve(servers, keep_alive="timeout=1")  # kept for half of it: 0.5 s
    target = HttpTarget("t", api.url)
    target.apply(effect("acme/refund/1"), timeout_s=2.0)
    target.apply(effect("acme/refund/2"), timeout_s=2.0)
    assert api.connections == 1
    time.sleep(0.6)
    target.apply(effect("acme/refund/3"), timeout_s=2.0)
    assert api.connections == 2


@pytest.mark.parametrize(("header", "seconds"), [
    (None, http_exchange.KEEP_IDLE_S), ("timeout=5, max=100", http_exchange.KEEP_IDLE_S),
    ("timeout=1", 0.5), ("max=3, timeout=0", 0.0), ("timeout=x", http_exchange.KEEP_IDLE_S)])
def test_keep_seconds(header, seconds):
    assert http_exchange.keep_seconds(header) == seconds


class _Decrypted:
    """Stands for a TLS socket holding decrypted bytes the kernel no longer shows."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def pending(self) -> int:
        return 7

    def fileno(self) -> int:
        return self._sock.fileno()


class _Conn:
    def __init__(self, sock: object) -> None:
        self.sock = sock


def test_bytes_held_by_the_tls_layer_count_as_something_to_read():
    a, b = socket.socketpair()
    with a, b:
        assert not http_exchange._dropped(_Conn(a))  # type: ignore[arg-type]
        assert http_exchange._dropped(_Conn(_Decrypted(a)))  # type: ignore[arg-type]
        b.sendall(b"x")
        assert http_exchange._dropped(_Conn(a))  # type: ignore[arg-type]


def test_a_descriptor_above_1024_is_still_checked_not_given_up():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1600:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1600, hard), hard))
    a, b = socket.socketpair()
    high = os.dup2(a.fileno(), 1500)
    try:
        with socket.socket(fileno=high) as sock, a, b:
            assert not http_exchange._dropped(_Conn(sock))  # type: ignore[arg-type]
            b.close()
            assert http_exchange._dropped(_Conn(sock))  # type: ignore[arg-type]
    finally:
        if soft < 1600:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Watched:
    """An exchange as ``Deadlines`` sees it: when it is cut."""

    def __init__(self) -> None:
        self.ended, self.cut = False, threading.Event()

    def cut_off(self) -> bool | None:
        self.cut.set()
        return True


def test_a_sooner_deadline_wakes_the_cutter_already_waiting_for_a_later_one():
    """The cutter sleeps until the earliest deadline it knows: a call watched later with a
    sooner deadline must still be cut at its own, not at the earlier call's."""
    deadlines = http_exchange.Deadlines()
    late, soon = Watched(), Watched()
    deadlines.watch(time.monotonic() + 30, late)  # type: ignore[arg-type]
    time.sleep(0.2)  # the cutter now waits for the late one
    started = time.monotonic()
    deadlines.watch(started + 0.2, soon)  # type: ignore[arg-type]
    assert soon.cut.wait(5) and time.monotonic() - started < 2
    assert not late.cut.is_set()
