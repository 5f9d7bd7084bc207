"""The HTTP/1.1 the HTTP connector speaks (connectors/http_wire.py), over a socket pair and
against a raw local server (no broker)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.client import BadStatusLine, IncompleteRead, RemoteDisconnected

import pytest

from connectors.http import HttpTarget
from connectors.http_wire import Answer, parse_received, read_answer, request_bytes
from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain.events import OutcomeStatus
from tests.connectors.raw_server import RawServer

pytestmark = pytest.mark.timeout(30)


def answer_to(raw: bytes, limit: int = 1 << 20, close: bool = False,
              method: str = "POST") -> Answer:
    """What ``read_answer`` makes of ``raw`` arriving in two pieces (a split mid-head)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(raw[: len(raw) // 2])
        threading.Timer(0.05, lambda: theirs.sendall(raw[len(raw) // 2:])).start()
        if close:
            threading.Timer(0.1, lambda: theirs.shutdown(socket.SHUT_WR)).start()
        return read_answer(ours, lambda: 2.0, limit, method)


def test_a_content_length_answer_is_read_and_its_connection_kept():
    got = answer_to(b"HTTP/1.1 201 Created\r\nContent-Length: 11\r\n"
                    b"Keep-Alive: timeout=4\r\n\r\n{\"id\":\"p1\"}")
    assert got == Answer(201, b'{"id":"p1"}', True, "timeout=4")


def test_a_chunked_answer_is_joined():
    got = answer_to(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"4;x=1\r\n{\"id\r\n7\r\n\":\"p1\"}\r\n0\r\nTrailer: 1\r\n\r\n")
    assert got == Answer(200, b'{"id":"p1"}', True, None)


def test_an_answer_read_to_the_end_of_the_stream_is_not_kept():
    got = answer_to(b"HTTP/1.1 200 OK\r\n\r\n{\"id\":\"p1\"}", close=True)
    assert got == Answer(200, b'{"id":"p1"}', False, None)


@pytest.mark.parametrize("head, keep", [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n", False),
    (b"HTTP/1.0 200 OK\r\n", False),
    (b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n", True),
])
def test_connection_close_and_http_1_0_are_not_kept(head, keep):
    assert answer_to(head + b"Content-Length: 2\r\n\r\n{}").keep is keep


def test_100_continue_is_skipped_and_another_1xx_is_final_and_not_kept():
    got = answer_to(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
                    b"Content-Length: 2\r\n\r\n{}")
    assert got == Answer(201, b"{}", True, None)
    assert answer_to(b"HTTP/1.1 102 Processing\r\n\r\n") == Answer(102, b"", False, None)


def test_a_body_over_the_limit_is_cut_and_not_kept():
    got = answer_to(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", limit=4)
    assert got == Answer(200, b"0123", False, None)
    chunked = answer_to(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"a\r\n0123456789\r\n0\r\n\r\n", limit=4)
    assert chunked == Answer(200, b"0123", False, None)


def test_bytes_after_the_answer_leave_the_connection_unkept():
    got = answer_to(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200")
    assert (got.body, got.keep) == (b"{}", False)


def test_malformed_or_cut_answers_raise_without_quoting_the_server():
    with pytest.raises(BadStatusLine) as bad:
        answer_to(b"SECRET-4242 200 OK\r\n\r\n")
    assert "SECRET" not in str(bad.value)
    with pytest.raises(RemoteDisconnected):
        answer_to(b"", close=True)
    with pytest.raises(IncompleteRead):
        answer_to(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n012", close=True)


def test_the_request_is_one_buffer_with_host_length_and_the_headers():
    raw = request_bytes("POST", "/v1/payments", "api.test:8080",
                        {"Idempotency-Key": "acme/refund/1"}, b'{"amount":1}')
    assert raw == (b"POST /v1/payments HTTP/1.1\r\nHost: api.test:8080\r\n"
                   b"Accept-Encoding: identity\r\nIdempotency-Key: acme/refund/1\r\n"
                   b"Content-Length: 12\r\n\r\n{\"amount\":1}")
    assert b"Content-Length" not in request_bytes("GET", "/x", "h", {}, None)


@pytest.mark.parametrize("path, headers", [
    ("/v1/pay ments", {}), ("/v1/payments", {"Idempotency-Key": "k\r\nX-Evil: 1"}),
    ("/v1/payments", {"Bad Name": "v"}),
])
def test_a_header_or_path_that_could_split_the_request_is_refused(path, headers):
    with pytest.raises(ValueError):
        request_bytes("POST", path, "h", headers, b"{}")


@pytest.fixture
def echo_server() -> Iterator[RawServer]:
    def serve(conn: socket.socket, stop: threading.Event) -> None:
        with conn:
            data = b""
            while not stop.is_set():
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
                if data.endswith(b'{"amount":1}'):
                    conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\n"
                                 b'{"id":"p1"}')
                    data = b""
    server = RawServer(serve)
    yield server
    server.close()


def test_a_call_writes_its_request_with_one_system_call(echo_server, monkeypatch):
    # http.client wrote the head and the body separately: two segments, two system calls.
    target = HttpTarget("t", echo_server.url)
    request = EffectRequest("acme/refund/1", 1, "claim-1", "refund", {"amount": 1}, "h")
    assert target.apply(request, 2.0) == "p1"  # connected and kept
    writes: list[bytes] = []
    real = socket.socket.sendall

    def counted(sock: socket.socket, data: bytes, *args: object) -> None:
        writes.append(bytes(data))
        real(sock, data, *args)

    monkeypatch.setattr(socket.socket, "sendall", counted)
    assert target.apply(request, 2.0) == "p1"
    ours = [w for w in writes if not w.startswith(b"HTTP/1.1")]  # not the server's answer
    assert len(ours) == 1 and ours[0].startswith(b"POST ") and ours[0].endswith(b"}")


@pytest.mark.parametrize("size", [b"-5", b"+5", b"0x5", b" "])
def test_a_chunk_size_that_is_not_plain_hex_is_malformed(size):
    """``int(text, 16)`` takes a sign or a 0x prefix; a negative size once sliced the
    buffer from its end and took the rest of the stream for the chunk."""
    from connectors.http_wire import Malformed

    with pytest.raises(Malformed):
        answer_to(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + size + b"\r\nhello world\r\n0\r\n\r\n")


@pytest.mark.parametrize(("head", "method"), [
    (b"HTTP/1.1 204 No Content\r\n\r\n", "POST"),
    (b"HTTP/1.1 304 Not Modified\r\n\r\n", "GET"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", "HEAD"),
])
def test_an_answer_without_a_body_is_read_at_once_and_kept(head, method):
    """204, 304 and a HEAD's answer end with their head: waiting for a body would hold the
    call to its deadline and lose the connection."""
    assert answer_to(head, method=method) == Answer(int(head[9:12]), b"", True, None)


def test_a_request_refused_before_sending_is_not_applied(echo_server, monkeypatch):
    """A header the request line cannot carry is refused here, before a byte leaves: not
    sent, so not applied (it was once reported unknown, for a lookup to settle)."""
    target = HttpTarget("t", echo_server.url, headers={"X-Tenant": "a\r\nX-Evil: 1"})
    request = EffectRequest("acme/refund/2", 1, "claim-2", "refund", {"amount": 1}, "h")
    writes: list[bytes] = []
    real = socket.socket.sendall
    monkeypatch.setattr(socket.socket, "sendall",
                        lambda sock, data, *a: writes.append(bytes(data)) or real(sock, data, *a))
    with pytest.raises(Exception) as refused:
        target.apply(request, 2.0)
    assert target.classify(refused.value) is OutcomeStatus.NOT_APPLIED
    assert writes == []


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer t", "X-Api-Version": "2"},
                                     {"content-type": "text/plain"},
                                     {"Idempotency-Key": "fixed"}, {"Host": "api.example"}])
def test_a_call_on_the_loop_writes_the_bytes_of_the_general_path_built_once(
        headers, monkeypatch) -> None:
    """The request line, Host, Accept-Encoding and the target's own headers were checked
    and encoded again for every call (about 10 µs of CPU); now once per target, only the
    key, the attempt id, the length and the body per call. Same bytes, same refusals."""
    import connectors.http as http_module

    target = HttpTarget(name="api", base_url="http://127.0.0.1:9/base", headers=headers)
    request = EffectRequest("acme/pay/k1", 1, "c1", "pay", {"b": 2, "a": 1}, "h")
    body, merged = target._apply_request(request)
    general = request_bytes("POST", "/base/v1/payments", "127.0.0.1:9", merged, body)
    built: list[str] = []
    real = http_module.request_bytes
    monkeypatch.setattr(http_module, "request_bytes",
                        lambda *a: built.append(a[0]) or real(*a))  # type: ignore[misc]
    for _ in range(3):
        assert target._apply_wire(request) == general
        assert target.start_apply(request, 1.0, lambda *_: None) is False  # none kept
    assert len(built) == (0 if not {"idempotency-key", "host"} & {h.lower() for h in headers}
                          else 6)
    for bad in ("acme/pay/k\r\nX-Evil: 1", "acme/pay/\0", "acme/pay/ключ"):
        with pytest.raises(ValueError):
            target._apply_wire(EffectRequest(bad, 1, "c1", "pay", {}, "h"))
        assert target.start_apply(EffectRequest(bad, 1, "c1", "pay", {}, "h"), 1.0,
                                  lambda *_: None) is False


def test_headers_changed_after_construction_reach_the_next_call() -> None:
    """A target's headers may change while it runs (a rotated token): the call on the loop
    sends them as ``apply`` does, never the ones its encoded request was built from."""
    target = HttpTarget(name="api", base_url="http://127.0.0.1:9/base",
                        headers={"Authorization": "Bearer old"})
    request = EffectRequest("acme/pay/k1", 1, "c1", "pay", {"a": 1}, "h")
    assert b"Bearer old" in target._apply_wire(request)
    target.headers["Authorization"] = "Bearer new"
    body, merged = target._apply_request(request)
    wire = target._apply_wire(request)
    assert b"Bearer new" in wire and b"Bearer old" not in wire
    assert wire == request_bytes("POST", "/base/v1/payments", "127.0.0.1:9", merged, body)


@pytest.mark.parametrize("raw, expected", [
    # the head ends at its first blank line, CRLF or LF alone, whatever the body holds
    (b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n\n\n{}", Answer(200, b"\n\n{}", True, None)),
    (b"HTTP/1.1 200 OK\nContent-Length: 3\n\n\n\r\n", Answer(200, b"\n\r\n", True, None)),
    # headers no answer reads, a line without a colon: skipped; the last of a name counts
    (b"HTTP/1.1 200 OK\r\nServer: x\r\nno colon\r\nContent-Length: 9\r\nCONTENT-length: 2\r\n"
     b"X-Connection: close\r\nKeep-Alive: timeout=1\r\nkeep-alive: timeout=8\r\n\r\n{}",
     Answer(200, b"{}", True, "timeout=8")),
])
def test_the_head_ends_at_its_first_blank_line_and_the_last_header_of_a_name_counts(
        raw, expected):
    assert parse_received(raw, False, 100) == expected
