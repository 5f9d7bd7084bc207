"""The HTTP connector against real local servers (threads on 127.0.0.1), no broker.

Each server here misbehaves in one precise way: it trickles its answer, never reads, drops
the connection, answers a given status, or hides the receipt id somewhere in its body. The
assertions are on what the connector classifies and, for lookups, on the exact path the
server received.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from connectors.http import HttpTarget
from ledger_stream.cli.common import settings_from
from ledger_stream.cli.connector_cmd import build_target
from ledger_stream.cli.main import build_parser
from ledger_stream.connector.target import EffectRequest, LookupUnavailable
from ledger_stream.domain.events import OutcomeStatus
from tests.connectors.raw_server import RawServer

pytestmark = pytest.mark.timeout(30)

NOT_APPLIED, FAILED, UNKNOWN = (OutcomeStatus.NOT_APPLIED, OutcomeStatus.FAILED,
                                OutcomeStatus.UNKNOWN)
SECRET_ARGS = {"amount": 987654, "to": "cust-secret-recipient"}  # must never reach a message


def effect(key: str = "acme/refund/1") -> EffectRequest:
    return EffectRequest(key, 1, "claim-1", "refund", SECRET_ARGS, "hash")


def assert_no_request_body_in(error: BaseException) -> None:
    text = str(error)
    assert "987654" not in text and "cust-secret-recipient" not in text, text


# --- servers --------------------------------------------------------------------------------


class Api:
    """An HTTP server that answers ``status`` and ``body`` to every request and records each
    request's method, raw path, headers and body."""

    def __init__(self) -> None:
        self.status, self.body = 201, b'{"id": "pay-1"}'
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length) if length else b""
                api.seen.append((self.command, self.path, dict(self.headers), body))
                self.send_response(api.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(api.body)))
                self.end_headers()
                self.wfile.write(api.body)

            do_GET = do_POST = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def answer(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body.encode() if isinstance(body, str) else json.dumps(body).encode()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()




def read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += conn.recv(4096)
    return data


def trickle(conn: socket.socket, stop: threading.Event, head: bytes = b"") -> None:
    """Read the request, send ``head`` at once, then the rest of a valid 201 one byte every
    0.2 s."""
    answer = b'HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 13\r\n\r\n'
    answer += b'{"id":"p-1"}\n'
    with conn:
        read_request(conn)
        try:
            conn.sendall(answer[:len(head)])
            for byte in answer[len(head):]:
                if stop.wait(0.2):
                    return
                conn.sendall(bytes([byte]))
        except OSError:
            return


def trickle_body(conn: socket.socket, stop: threading.Event) -> None:
    trickle(conn, stop, head=b"HTTP/1.1 201 Created\r\nConnection: close\r\n"
            b"Content-Length: 13\r\n\r\n")


def drop_after_reading(conn: socket.socket, stop: threading.Event) -> None:
    read_request(conn)
    conn.close()


@pytest.fixture
def api() -> Iterator[Api]:
    server = Api()
    yield server
    server.close()


@pytest.fixture
def raw_server() -> Iterator[Callable[..., RawServer]]:
    started: list[RawServer] = []

    def start(serve: Callable[[socket.socket, threading.Event], None]) -> RawServer:
        started.append(RawServer(serve))
        return started[-1]

    yield start
    for server in started:
        server.close()


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that completes the TCP handshake (the kernel's backlog) and never reads."""
    listener = socket.create_server(("127.0.0.1", 0))
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A port bound but not listening: every connection is refused."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    yield f"http://127.0.0.1:{holder.getsockname()[1]}"
    holder.close()


def failure(call: Callable[[], Any]) -> tuple[Exception, float]:
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        call()
    return raised.value, time.monotonic() - started


# --- the deadline: the whole call, not each socket wait -------------------------------------


def calls_running() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "http-call"}


def assert_call_ends_soon(before: set[threading.Thread]) -> None:
    """The cut shut the socket down: the call's I/O thread does not read on."""
    for thread in calls_running() - before:
        thread.join(0.5)
        assert not thread.is_alive()


@pytest.mark.parametrize("serve", [trickle, trickle_body], ids=["status-line", "body"])
def test_trickled_response_is_cut_at_the_deadline_and_unknown(raw_server, serve):
    # Regression: a socket timeout bounds each recv, so a 1 s call lasted until the last byte.
    target = HttpTarget("t", raw_server(serve).url)
    before = calls_running()
    error, elapsed = failure(lambda: target.apply(effect(), timeout_s=1.0))
    assert elapsed < 2.5, f"the call outlived its deadline: {elapsed:.2f} s"
    assert target.classify(error) is UNKNOWN
    assert "after sending POST /v1/payments" in str(error)
    assert_no_request_body_in(error)
    assert_call_ends_soon(before)


def test_trickled_lookup_is_cut_at_the_deadline(raw_server):
    target = HttpTarget("t", raw_server(trickle).url)
    error, elapsed = failure(lambda: target.lookup("acme/refund/1", timeout_s=1.0))
    assert elapsed < 2.5  # a trickle lasts far longer; slack for a busy machine
    assert isinstance(error, LookupUnavailable)


def test_silent_server_is_unknown_within_the_deadline(silent_url):
    target = HttpTarget("t", silent_url)
    before = calls_running()
    error, elapsed = failure(lambda: target.apply(effect(), timeout_s=1.0))
    assert elapsed < 2.5  # a silent server never answers; slack for a busy machine
    assert target.classify(error) is UNKNOWN
    assert_no_request_body_in(error)
    assert_call_ends_soon(before)
    error, elapsed = failure(lambda: target.lookup("k", timeout_s=1.0))
    assert elapsed < 2.5 and isinstance(error, LookupUnavailable)


def test_refused_connection_is_not_applied(refused_url):
    target = HttpTarget("t", refused_url)
    error, elapsed = failure(lambda: target.apply(effect(), timeout_s=2.0))
    assert elapsed < 1.0
    assert target.classify(error) is NOT_APPLIED
    assert "ConnectionRefusedError before sending" in str(error)
    with pytest.raises(LookupUnavailable):
        target.lookup("k", timeout_s=2.0)


def test_dropped_connection_after_sending_is_unknown(raw_server):
    target = HttpTarget("t", raw_server(drop_after_reading).url)
    error, _ = failure(lambda: target.apply(effect(), timeout_s=2.0))
    assert target.classify(error) is UNKNOWN
    assert "after sending POST /v1/payments" in str(error)


def test_slow_dns_is_not_applied_at_the_deadline_and_never_sends(api, monkeypatch):
    # getaddrinfo obeys no socket timeout: the call must end anyway, and the late connect
    # must not send the request after the call reported "not applied".
    real = socket.getaddrinfo

    def slow_getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        time.sleep(1.5)
        return real("127.0.0.1", *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow_getaddrinfo)
    port = api.url.rsplit(":", 1)[1]
    target = HttpTarget("t", f"http://slow-dns.invalid:{port}")
    error, elapsed = failure(lambda: target.apply(effect(), timeout_s=0.5))
    assert elapsed < 1.0
    assert target.classify(error) is NOT_APPLIED
    time.sleep(2.0)  # the abandoned connect finishes meanwhile
    assert api.seen == []


# --- status classes -------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "declared", "expected"), [
    (400, {}, FAILED), (404, {}, FAILED), (409, {}, FAILED), (422, {}, FAILED),
    (408, {}, UNKNOWN), (429, {}, UNKNOWN),
    (500, {}, UNKNOWN), (502, {}, UNKNOWN), (503, {}, UNKNOWN), (504, {}, UNKNOWN),
    (302, {}, UNKNOWN),
    (429, {"not_applied_statuses": {429, 503}}, NOT_APPLIED),
    (503, {"not_applied_statuses": {429, 503}}, NOT_APPLIED),
    (500, {"not_applied_statuses": {429, 503}}, UNKNOWN),
    (409, {"unknown_statuses": {409}}, UNKNOWN),
    (501, {"failed_statuses": {501}}, FAILED),
])
def test_status_classes(api, status, declared, expected):
    api.answer(status, {"error": "x", "message": "detail " * 100})
    api_body = json.dumps({"error": "x", "message": "detail " * 100})
    target = HttpTarget("t", api.url, **declared)
    error, _ = failure(lambda: target.apply(effect(), timeout_s=2.0))
    assert target.classify(error) is expected
    message = str(error)
    assert message.startswith(f"HTTP {status} (")
    # The body is the API's text (it may echo a card number): only its length is kept.
    assert message.endswith(f"body: {len(api_body)} characters withheld")
    assert '"error"' not in message and "detail" not in message
    assert_no_request_body_in(error)


def test_2xx_returns_the_receipt_and_sends_key_and_attempt_headers(api):
    target = HttpTarget("t", api.url)
    assert target.apply(effect("acme/refund/9"), timeout_s=2.0) == "pay-1"
    ((method, path, headers, body),) = api.seen
    assert (method, path) == ("POST", "/v1/payments")
    assert headers["Idempotency-Key"] == "acme/refund/9"
    assert headers["X-Attempt-Id"] == "claim-1"
    assert json.loads(body) == SECRET_ARGS


def test_credentials_in_the_base_url_are_sent_as_basic_auth(api):
    # `--base-url http://u:p@host` sent no credentials: the API answered 401 (failed).
    host = api.url.removeprefix("http://")
    target = HttpTarget("t", f"http://pay%40ops:s3cr%3At@{host}/api")
    target.apply(effect("acme/refund/9"), timeout_s=2.0)
    target.lookup("acme/refund/9", timeout_s=2.0)
    basic = "Basic " + base64.b64encode(b"pay@ops:s3cr:t").decode()
    assert [(m, p, h["Authorization"], h["Host"]) for m, p, h, _ in api.seen] == [
        ("POST", "/api/v1/payments", basic, host),
        ("GET", "/api/v1/payments/by-key/acme%2Frefund%2F9", basic, host)]


def test_base_url_path_is_a_prefix(api):
    HttpTarget("t", api.url + "/api/").apply(effect(), timeout_s=2.0)
    assert api.seen[0][1] == "/api/v1/payments"


# --- the receipt id -------------------------------------------------------------------------


@pytest.mark.parametrize(("id_field", "body", "receipt"), [
    ("id", {"id": "pay-7"}, "pay-7"),
    ("data.payment.id", {"data": {"payment": {"id": "pay-8"}}}, "pay-8"),
    ("data.0.id", {"data": [{"id": 42}]}, "42"),
])
def test_receipt_id_field_path(api, id_field, body, receipt):
    api.answer(200, body)
    target = HttpTarget("t", api.url, id_field=id_field)
    assert target.apply(effect(), timeout_s=2.0) == receipt
    assert target.lookup("k", timeout_s=2.0) == receipt


@pytest.mark.parametrize(("id_field", "body"), [
    ("id", {"payment_id": "pay-7", "amount": 987654}),
    ("data.payment.id", {"data": {"payment": None}}),
    ("data.payment.id", {"data": "pay"}),
    ("id", {"id": None}),
    ("id", {"id": ""}),
    ("id", {"id": {"nested": 1}}),
    ("id", "<html>created</html>"),
    ("id", ""),
])
def test_2xx_without_the_receipt_id_is_unknown_and_lookup_unavailable(api, id_field, body):
    api.answer(201, body)
    target = HttpTarget("t", api.url, id_field=id_field)
    error, _ = failure(lambda: target.apply(effect(), timeout_s=2.0))
    assert target.classify(error) is UNKNOWN
    assert "without a receipt id" in str(error)
    assert "987654" not in str(error)  # a 2xx body describes the effect: never quoted
    api.answer(200, body)
    with pytest.raises(LookupUnavailable):
        target.lookup("k", timeout_s=2.0)


# --- lookup ---------------------------------------------------------------------------------

KEY = "acme/refund 7+x?ü"


@pytest.mark.parametrize(("encoding", "template", "received"), [
    ("segment", "/v1/payments/by-key/{key}", "/v1/payments/by-key/acme%2Frefund%207%2Bx%3F%C3%BC"),
    ("path", "/v1/payments/{key}/receipt", "/v1/payments/acme/refund%207%2Bx%3F%C3%BC/receipt"),
    ("query", "/v1/payments?idempotency_key={key}",
     "/v1/payments?idempotency_key=acme%2Frefund+7%2Bx%3F%C3%BC"),
])
def test_lookup_key_encodings(api, encoding, template, received):
    api.answer(200, {"id": "pay-1"})
    target = HttpTarget("t", api.url, lookup_path=template, lookup_key_encoding=encoding)
    assert target.lookup(KEY, timeout_s=2.0) == "pay-1"
    assert [(method, path) for method, path, _, _ in api.seen] == [("GET", received)]


def test_lookup_default_encoding_is_one_segment(api):
    HttpTarget("t", api.url).lookup("a/b", timeout_s=2.0)
    assert api.seen[0][1] == "/v1/payments/by-key/a%2Fb"


def test_lookup_404_is_absent(api):
    api.answer(404, {"error": "not_found"})
    assert HttpTarget("t", api.url).lookup("k", timeout_s=2.0) is None


@pytest.mark.parametrize("status", [500, 503, 400, 302])
def test_lookup_other_statuses_are_unavailable(api, status):
    api.answer(status, {"error": "boom"})
    with pytest.raises(LookupUnavailable, match=f"HTTP {status}") as raised:
        HttpTarget("t", api.url).lookup("k", timeout_s=2.0)
    assert str(raised.value).endswith(", body: 17 characters withheld")  # never quoted


def test_without_a_lookup_path_the_target_is_not_queryable(api):
    target = HttpTarget("t", api.url, "/v1/payments", None)
    assert not target.queryable
    with pytest.raises(LookupUnavailable):
        target.lookup("k", timeout_s=2.0)
    assert api.seen == []


# --- construction ---------------------------------------------------------------------------


def test_deduplication_is_declared_never_assumed():
    assert HttpTarget("t", "http://127.0.0.1:1").deduplicates is False
    positional = HttpTarget("t", "http://127.0.0.1:1", "/pay", "/pay/{key}", True)
    assert positional.deduplicates and positional.apply_path == "/pay"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"base_url": "ftp://x"}, "base URL"),
    ({"lookup_path": "/v1/payments/by-key"}, "{key}"),
    ({"apply_path": "v1/payments"}, "start with /"),
    ({"lookup_key_encoding": "base64"}, "segment, path, query"),
    ({"id_field": "data..id"}, "dotted path"),
    ({"not_applied_statuses": {200}}, "300 to 599"),
    ({"not_applied_statuses": {503}, "unknown_statuses": {503}}, "503"),
])
def test_bad_configuration_is_refused(kwargs, message):
    kwargs = {"base_url": "http://127.0.0.1:1", **kwargs}
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        HttpTarget("t", **kwargs)


# --- the command line -----------------------------------------------------------------------


def parse(*flags: str) -> Any:
    return build_parser().parse_args(["connector", "http", "--name", "pay", *flags])


def target_from(*flags: str) -> HttpTarget:
    args = parse(*flags)
    target = build_target(args, settings_from(args, connector_name=args.name))
    assert isinstance(target, HttpTarget)
    return target


def test_cli_defaults_are_the_safe_ones():
    target = target_from("--base-url", "http://127.0.0.1:8080")
    assert target.deduplicates is False
    assert target.not_applied_statuses == frozenset()
    assert (target.id_field, target.lookup_key_encoding) == ("id", "segment")
    assert target.lookup_path == "/v1/payments/by-key/{key}"


def test_cli_flags_reach_the_target():
    target = target_from(
        "--base-url", "http://127.0.0.1:8080", "--deduplicates",
        "--not-applied-status", "429,503", "--not-applied-status", "408",
        "--unknown-status", "409", "--failed-status", "501",
        "--id-field", "data.payment.id",
        "--lookup-path", "/v1/payments?idempotency_key={key}", "--lookup-key-encoding", "query")
    assert target.deduplicates is True
    assert target.not_applied_statuses == {408, 429, 503}
    assert (target.unknown_statuses, target.failed_statuses) == ({409}, {501})
    assert target.id_field == "data.payment.id"
    assert target.lookup_key_encoding == "query"
    assert target_from("--base-url", "http://h:1", "--no-lookup").lookup_path is None


@pytest.mark.parametrize(("flags", "message"), [
    (["--no-dedup"], "unrecognized arguments: --no-dedup"),
    (["--not-applied-status", "503,abc"], "'abc' is not an HTTP status"),
    (["--not-applied-status", "200"], "300 to 599"),
    (["--lookup-path", "/v1/payments/by-key"], "{key}"),
    (["--lookup-key-encoding", "raw"], "invalid choice"),
    (["--id-field", ".id"], "dotted path"),
    (["--apply-path", "payments"], "start with /"),
])
def test_cli_bad_values_are_clear_errors(capsys, flags, message):
    with pytest.raises(SystemExit) as exited:
        parse("--base-url", "http://127.0.0.1:8080", *flags)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_help_describes_every_flag_and_default(capsys):
    with pytest.raises(SystemExit):
        parse("--help")
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--base-url", "--apply-path", "--lookup-path", "--lookup-key-encoding",
                 "--no-lookup", "--deduplicates", "--id-field", "--not-applied-status",
                 "--unknown-status", "--failed-status"):
        assert flag in text
    for default in ("default: /v1/payments)", "default: /v1/payments/by-key/{key})",
                    "default: segment)", "default: id)", "default: none", "default: off"):
        assert default in text, default
    assert "5xx" in text and "408" in text and "429" in text
