"""The payments sandbox over HTTP: a Stripe-like API that deduplicates by idempotency key.

Every answer is JSON, errors included (``{"error": CODE, "message": TEXT}``); a handler that
fails answers 500 without a traceback. One log line per request goes to stderr with the
method, path, status and a hash of the key, never the body. Routes:

- ``POST /v1/payments``: 201 new effect, 200 + ``Idempotent-Replayed: true`` for the same
  key and body, 409 ``idempotency_key_reused`` for the same key and another body (no effect).
- ``GET /v1/payments/by-key/<percent-encoded key>``: 200 the payment, 404 ``not_found``.
- ``GET /v1/ledger``: every effect (with the body that made it) and every request received
  (the tests' ground truth, and what ``ledger-stream watch`` reads).
- ``GET|POST|DELETE /v1/faults``: list, arm, clear faults (see :mod:`.faults`).
- ``GET /health``: ``{"ok": true}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote, urlsplit

from ledger_lab.sandbox.faults import (
    DEFAULT_DECLINE,
    EXIT_CRASH_AFTER_COMMIT,
    EXIT_CRASH_BEFORE_COMMIT,
    Fault,
    FaultBoard,
    InvalidFault,
)
from ledger_lab.sandbox.store import Outcome, Payment, PaymentStore, outcome_for
from ledger_stream.domain.keys import args_hash
from ledger_stream.logs import log_fields

log = logging.getLogger("ledger_lab.sandbox")

BY_KEY_PREFIX = "/v1/payments/by-key/"
MAX_BODY_BYTES = 1 << 20
MAX_KEY_CHARS = 1024


class HttpError(Exception):
    """Answered as ``{"error": code, "message": message}`` with ``status``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class SandboxServer(ThreadingHTTPServer):
    """The listening socket plus the shared store and faults; one thread per connection."""

    daemon_threads = True
    request_queue_size = 128  # the default 5 drops SYNs under a burst of concurrent clients

    def __init__(self, address: tuple[str, int], store: PaymentStore, faults: FaultBoard,
                 latency_s: float = 0.0) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.store, self.faults, self.latency_s = store, faults, latency_s
        super().__init__(address, SandboxHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("sandbox connection error", extra=log_fields(client=str(client_address)))


def _header(raw: str | None) -> str | None:
    # http.server decodes header bytes as latin-1; clients send non-ASCII keys as UTF-8.
    if raw is None:
        return None
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def key_digest(key: str | None) -> str | None:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16] if key is not None else None


class SandboxHandler(BaseHTTPRequestHandler):
    server: SandboxServer
    protocol_version = "HTTP/1.1"
    # Without TCP_NODELAY an answer waits for the client's delayed ACK of the one before
    # (40 ms per call) when it is written in two pieces, as http.server's errors are.
    disable_nagle_algorithm = True
    server_version = "ledger-stream-sandbox"
    _status: int | str = 0  # for the log line: the status sent, or what happened instead
    _key: str | None = None
    _allow = ""
    _body = b""

    # -- routing -----------------------------------------------------------------------------

    def _dispatch(self) -> None:
        method, self._status, self._key = self.command, 0, None
        path = urlsplit(self.path).path
        try:
            self._body = self._read_body()
            routes = self._routes(path)
            if routes is None:
                raise HttpError(404, "not_found", f"no route {path}")
            handler = routes.get(method)
            if handler is None:
                self._allow = ", ".join(routes)
                raise HttpError(405, "method_not_allowed", f"{method} not allowed on {path}")
            handler()
        except HttpError as exc:
            headers = {"Allow": self._allow} if exc.status == 405 else {}
            self._reply(exc.status, {"error": exc.code, "message": exc.message}, headers)
        except Exception:
            log.exception("sandbox handler failed", extra=log_fields(method=method))
            self._reply(500, {"error": "internal", "message": "internal error, see the log"})
        if log.isEnabledFor(logging.INFO):  # the key's hash and the fields cost more
            shown = BY_KEY_PREFIX + "<key>" if path.startswith(BY_KEY_PREFIX) else path
            log.info("%s %s %s", method, shown, self._status, extra=log_fields(
                method=method, path=shown, status=self._status,
                key_sha=key_digest(self._key)))

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _dispatch

    def _routes(self, path: str) -> dict[str, Callable[[], None]] | None:
        if path.startswith(BY_KEY_PREFIX) and len(path) > len(BY_KEY_PREFIX):
            return {"GET": self._get_payment}
        return {
            "/v1/payments": {"POST": self._post_payment},
            "/v1/ledger": {"GET": self._get_ledger},
            "/v1/faults": {"GET": self._get_faults, "POST": self._post_faults,
                           "DELETE": self._delete_faults},
            "/health": {"GET": self._get_health},
        }.get(path)

    # -- handlers ----------------------------------------------------------------------------

    def _post_payment(self) -> None:
        if self.server.latency_s:
            time.sleep(self.server.latency_s)  # a real API's own time, before anything
        key = _header(self.headers.get("Idempotency-Key"))
        if not key:
            raise HttpError(400, "missing_idempotency_key", "send an Idempotency-Key header")
        if len(key) > MAX_KEY_CHARS:
            raise HttpError(400, "idempotency_key_too_long", f"keys are at most {MAX_KEY_CHARS}")
        self._key = key
        attempt_id = _header(self.headers.get("X-Attempt-Id")) or None
        body = self._json_body()
        if not isinstance(body, dict):
            raise HttpError(400, "body_not_object", "the body must be a JSON object")
        try:
            body_hash = args_hash(body)
        except (ValueError, TypeError) as exc:
            raise HttpError(400, "malformed_json", f"body cannot be hashed: {exc}") from exc
        store = self.server.store
        existing = store.get(key)
        if existing is not None:  # a replay is answered normally, never faulted
            outcome = outcome_for(existing, body_hash)
            store.record_request(key, attempt_id, body_hash, outcome)
            self._answer(existing, outcome)
            return
        fault = self.server.faults.take(key)
        if fault is not None:
            self._post_with_fault(fault, key, attempt_id, body, body_hash)
            return
        self._answer(*store.create(key, body_hash, body, attempt_id))

    def _post_with_fault(self, fault: Fault, key: str, attempt_id: str | None,
                         body: dict[str, Any], body_hash: str) -> None:
        store, label = self.server.store, f"fault:{fault.mode}"
        if fault.delay:
            time.sleep(fault.delay)
        if fault.mode == "error_before_commit":
            store.record_request(key, attempt_id, body_hash, label)
            raise HttpError(503, "unavailable", "injected fault: nothing was committed")
        if fault.mode == "decline":
            store.record_request(key, attempt_id, body_hash, label)
            raise HttpError(402, "card_declined", fault.message or DEFAULT_DECLINE)
        if fault.mode == "crash_before_commit":
            store.record_request(key, attempt_id, body_hash, label)
            self._crash(EXIT_CRASH_BEFORE_COMMIT, label)
        payment, outcome = store.create(key, body_hash, body, attempt_id, result=label)
        if fault.mode == "crash_after_commit":
            self._crash(EXIT_CRASH_AFTER_COMMIT, label)
        if fault.mode == "commit_then_drop":
            self._drop(label)
        else:  # delay_before_commit
            self._answer(payment, outcome)

    def _get_payment(self) -> None:
        self._key = unquote(urlsplit(self.path).path[len(BY_KEY_PREFIX):])
        payment = self.server.store.get(self._key)
        if payment is None:
            raise HttpError(404, "not_found", "no payment for this idempotency key")
        self._reply(200, payment.to_response())

    def _get_ledger(self) -> None:
        self._reply(200, self.server.store.ledger())

    def _get_faults(self) -> None:
        self._reply(200, {"faults": [f.to_json() for f in self.server.faults.armed()]})

    def _post_faults(self) -> None:
        try:
            self.server.faults.arm(Fault.from_json(self._json_body()))
        except InvalidFault as exc:
            raise HttpError(400, "invalid_fault", str(exc)) from exc
        self._get_faults()

    def _delete_faults(self) -> None:
        self.server.faults.clear()
        self._get_faults()

    def _get_health(self) -> None:
        self._reply(200, {"ok": True})

    # -- request and response ----------------------------------------------------------------

    def _read_body(self) -> bytes:
        # Read before routing, so that no error answer leaves an unread body on the stream.
        length = self.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES or \
                "Transfer-Encoding" in self.headers:
            self.close_connection = True
            raise HttpError(413 if length.isdigit() else 400, "bad_content_length",
                            f"send a Content-Length of at most {MAX_BODY_BYTES} bytes")
        return self.rfile.read(int(length)) if int(length) else b""

    def _json_body(self) -> Any:
        try:
            return json.loads(self._body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise HttpError(400, "malformed_json", f"the body is not valid JSON: {exc}") from exc

    def _answer(self, payment: Payment, outcome: Outcome) -> None:
        if outcome == "created":
            self._reply(201, payment.to_response())
        elif outcome == "replayed":
            self._reply(200, payment.to_response(), {"Idempotent-Replayed": "true"})
        else:
            raise HttpError(409, "idempotency_key_reused",
                            "this idempotency key was used with a different body; no effect")

    def _reply(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None,
               ) -> None:
        data = json.dumps(body).encode("utf-8")
        if status == 503:
            headers = {**(headers or {}), "Retry-After": "0"}
        self._status = status
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            # The head and the body in one write (end_headers, then the body): written
            # apart, they often reached the client as two segments, so a client read,
            # parsed and waited twice per answer, and this process sent twice.
            self._headers_buffer.append(b"\r\n" + data)  # type: ignore[attr-defined]
            self.flush_headers()
        except OSError:  # the client gave up (timeout, reset): nothing left to tell it
            self.close_connection = True
            self._status = f"{status}:client_gone"

    def _drop(self, label: str) -> None:
        self._status = label
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client may already have gone
            self.connection.shutdown(socket.SHUT_RDWR)

    def _crash(self, code: int, label: str) -> NoReturn:
        log.warning("sandbox exiting %s", code, extra=log_fields(
            fault=label, key_sha=key_digest(self._key), exit_code=code))
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(code)

    # -- http.server hooks -------------------------------------------------------------------

    def send_error(self, code: int, message: str | None = None, explain: str | None = None,
                   ) -> None:
        """Errors raised by http.server itself (bad request line, unknown method): JSON too."""
        self.close_connection = True
        self._reply(code, {"error": HTTPStatus(code).phrase.lower().replace(" ", "_"),
                           "message": message or HTTPStatus(code).phrase})
        log.info("%s", code, extra=log_fields(status=code, message=message))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        """Silenced: ``_dispatch`` logs one structured line per request instead."""


def make_server(host: str, port: int, db: str | Path, faults: tuple[Fault, ...] = (),
                latency_s: float = 0.0) -> SandboxServer:
    """A bound, listening sandbox (not yet serving). Raises OSError or sqlite3.Error."""
    store = PaymentStore(db)
    try:
        return SandboxServer((host, port), store, FaultBoard(faults), latency_s)
    except BaseException:
        store.close()
        raise


def run_sandbox(host: str, port: int, db: str | Path, faults: tuple[Fault, ...] = (),
                announce: Callable[[str], None] = print, latency_s: float = 0.0) -> int:
    """Serve until SIGTERM or SIGINT, then stop cleanly and return 0.

    ``announce`` gets ``sandbox listening on <url>`` once the socket accepts connections
    (with port 0 the URL names the port the system picked). Must run on the main thread.
    """
    server = make_server(host, port, db, faults, latency_s)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGTERM, signal.SIGINT)}
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                     name="sandbox-http", daemon=True).start()
    try:
        announce(f"sandbox listening on {server.url}")
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        server.store.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("sandbox stopped", extra=log_fields(url=server.url))
    return 0
