"""HTTP APIs that take an idempotency key header (Stripe-like payments APIs, the sandbox).

The operation key goes in ``Idempotency-Key`` and the attempt id in ``X-Attempt-Id``. A call
(connect, send, status, headers and body) takes at most ``timeout_s`` seconds in all, so
the connector's lease covers it. The phase it reached decides the outcome:

- nothing sent (connection refused, DNS failure, connect timeout, deadline before sending):
  ``not_applied``;
- the request may have left (read timeout, dropped connection, deadline after sending):
  ``unknown``;
- 2xx with the receipt id at ``id_field`` (a dotted path): succeeded; 2xx without it, or
  not JSON: ``unknown``, since the effect may have happened;
- a status declared in ``not_applied_statuses``, ``failed_statuses`` or
  ``unknown_statuses`` (all empty by default): as declared;
- other 4xx: ``failed`` (the API refused the request), except 408 and 429: ``unknown``;
- 5xx, 3xx: ``unknown``.

A wrong ``not_applied`` lets the ledger send a second payment, so no status means "not
processed" unless the user declares it from the API's documentation. A 5xx may come after
the API committed, or from a proxy that had forwarded the request. 408 and 429 are
transient, so ``failed`` (final) would be wrong, and HTTP does not promise they come before
processing (a gateway may answer them after forwarding). Redirects are not followed: a POST
cannot safely be replayed elsewhere.

Error messages carry the status, its meaning, the request line (the lookup's template,
never the key) and the class of a socket or TLS failure; a response body only as its
length (``connector/redaction.py``).

Connections are kept alive between calls (``_Pool``) when the server allows it, after a
final (2xx-5xx) response read to its end. A kept connection is used again only if it has
been idle less than ``KEEP_IDLE_S`` (and less than half the server's own ``Keep-Alive:
timeout``) and has nothing to read (a server that closed it has sent its end-of-stream): a
request sent on a connection the server closes at the same moment fails after sending,
which is ``unknown`` and sends the key to reconciliation, never a wrong ``not_applied``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit

from ledger_stream import tracing
from ledger_stream.connector.redaction import withheld
from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target, TargetError
from ledger_stream.domain.events import OutcomeStatus

# How ``{key}`` is filled in a lookup path template.
KEY_ENCODINGS: dict[str, Callable[[str], str]] = {
    "segment": lambda key: quote(key, safe=""),  # one path segment: "/" becomes %2F
    "path": lambda key: quote(key, safe="/"),  # "/" stays a path separator
    "query": lambda key: quote_plus(key, safe=""),  # a query string value
}
TRANSIENT_4XX = frozenset({408, 429})  # unknown unless declared: see the module docstring
MAX_RESPONSE_BYTES = 1 << 20  # a larger 2xx body is cut, fails to parse: unknown
# A kept connection idle longer is closed, not used: servers close idle connections after a
# few seconds (gunicorn 2 s, Node 5 s), and one closed as a request goes out makes the call
# unknown. A server's ``Keep-Alive: timeout=N`` shortens it to N/2.
KEEP_IDLE_S = 1.0
MAX_KEPT = 256  # idle connections per target; one per call in flight is enough


class NotSent(TargetError):
    """The request never left: no effect."""


class Ambiguous(TargetError):
    """The request may have reached the API; whether it applied is unknown."""


class Refused(TargetError):
    """The API answered a status other than 2xx; ``outcome`` is what it means here."""

    def __init__(self, status: int, outcome: OutcomeStatus, why: str, body: str) -> None:
        super().__init__(f"HTTP {status} ({why}), {withheld('body', body)}")
        self.status, self.outcome = status, outcome


# --- values, checked once (the CLI turns their ValueError into a flag error) -----------------


def parse_statuses(text: str) -> frozenset[int]:
    """``"429,503"`` -> {429, 503}; a final status 300-599 each."""
    codes = [part.strip() for part in text.split(",") if part.strip()]
    for code in codes:
        if not code.isdigit():
            raise ValueError(f"{code!r} is not an HTTP status (expected e.g. 429,503)")
    return check_statuses(int(code) for code in codes)


def check_statuses(codes: Iterable[int]) -> frozenset[int]:
    statuses = frozenset(codes)
    # A 2xx is a success and 1xx is never final: declaring them would be a mistake.
    if wrong := sorted(code for code in statuses if not 300 <= code <= 599):
        raise ValueError(f"HTTP statuses must be 300 to 599, got {wrong}")
    return statuses


def check_path(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"a path must start with /, got {path!r}")
    return path


def check_lookup_template(template: str) -> str:
    if "{key}" not in check_path(template):
        raise ValueError(f"the lookup path must contain {{key}}, got {template!r}")
    return template


def check_id_field(path: str) -> str:
    if not path or not all(path.split(".")):
        raise ValueError(f"the id field must be a dotted path like data.payment.id, got {path!r}")
    return path


def receipt_id(text: str, id_field: str) -> str:
    """The string or number at ``id_field`` (dotted; a digit indexes a list) of a JSON body.
    Raises ValueError naming what is missing, never quoting the body (it describes the
    effect)."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        raise ValueError("the body is not JSON") from None
    for part in id_field.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise ValueError(f"no {part!r} on the path {id_field!r}")
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise ValueError(f"{id_field!r} is not a non-empty string or number")
    return str(value)


# --- kept connections ------------------------------------------------------------------------


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """True if ``conn`` cannot carry another request: no socket, or something to read on an
    idle connection (the server's end-of-stream, or bytes no request asked for), in the
    kernel or already decrypted inside the TLS object."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        pending = getattr(sock, "pending", None)  # SSLSocket: bytes select() cannot see
        if pending is not None and pending():
            return True
        poller = select.poll()  # not select(): it refuses descriptors >= FD_SETSIZE
        poller.register(sock, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    except (OSError, ValueError):  # closed under us
        return True


def _keep_seconds(keep_alive: str | None) -> float:
    """How long to keep a connection: KEEP_IDLE_S, or half the server's ``Keep-Alive:
    timeout=N`` if that is shorter."""
    for part in (keep_alive or "").split(","):
        name, _, value = part.partition("=")
        if name.strip().lower() == "timeout":
            try:
                return min(KEEP_IDLE_S, max(float(value.strip()), 0.0) / 2)
            except ValueError:
                break
    return KEEP_IDLE_S


class _Pool:
    """Idle keep-alive connections to one server, the most recently used taken first."""

    def __init__(self, make: Callable[[], http.client.HTTPConnection]) -> None:
        self._make = make
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []  # (conn, stale at)
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> http.client.HTTPConnection:
        """A kept connection still fit to use, else a new one (not yet connected)."""
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, stale_at = self._idle.pop()
                # Close the other stale ones now rather than at their turn.
                now = time.monotonic()  # one reading: each entry is in exactly one list
                stale = [c for c, t in self._idle if now >= t]
                self._idle = [(c, t) for c, t in self._idle if now < t]
            for old in stale:
                old.close()
            if now < stale_at and not _dropped(conn):
                return conn
            conn.close()
        return self._make()

    def give(self, conn: http.client.HTTPConnection, keep_s: float) -> None:
        """Keep ``conn``, whose last response was read to its end, for ``keep_s`` seconds."""
        with self._lock:
            if not self._closed and len(self._idle) < MAX_KEPT and keep_s > 0:
                self._idle.append((conn, time.monotonic() + keep_s))
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


# --- one bounded exchange ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Reply:
    status: int
    text: str


class _Exchange:
    """One request and its response within ``timeout_s`` seconds of wall-clock time in all.

    A socket timeout bounds each wait, not their sum: a server trickling its answer a byte
    at a time kept a 1 s call alive 2.8 s, past the lease. So a helper thread does the I/O
    (each step with the time left as its socket timeout) and the caller stops waiting at the
    deadline. It then cuts: it shuts the socket down, which ends a blocked read or write, and
    forbids a helper still connecting to send (a DNS lookup obeys no socket timeout, so that
    helper may linger, but it never sends). ``run`` raises NotSent when the request had not
    started to leave, Ambiguous when it had.

    ``conn`` comes from ``pool``, connected (kept alive) or not; it goes back to the pool only
    if its response was read to the end, the server keeps it open, and it was not cut.
    """

    def __init__(self, pool: _Pool, method: str, path: str,
                 shown_path: str, body: bytes | None, headers: dict[str, str]) -> None:
        self._pool, self._conn = pool, pool.take()
        self._method, self._path, self._body = method, path, body
        self._headers, self._shown = headers, f"{method} {shown_path}"
        self._lock = threading.Lock()  # orders "cut" against "start sending" and the end
        self._sending = self._cut = self._finished = False
        self._keep_s = 0.0  # how long the connection may be kept after this exchange
        self._sock: socket.socket | None = None  # kept: getresponse() may drop conn.sock
        self._result: _Reply | TargetError | None = None
        self._deadline = 0.0

    def run(self, timeout_s: float) -> _Reply:
        self._deadline = time.monotonic() + timeout_s
        helper = threading.Thread(target=self._talk, name="http-call", daemon=True)
        helper.start()
        helper.join(timeout_s)
        if helper.is_alive():
            sending = self._cut_off()
            if sending:
                raise Ambiguous(f"Deadline after sending {self._shown}: "
                                f"no complete response within {timeout_s:g} s")
            if sending is not None:
                raise NotSent(f"Deadline before sending {self._shown}: "
                              f"no connection within {timeout_s:g} s")
            # None: the helper ended between the join and the cut; its result stands.
        if isinstance(self._result, _Reply):
            return self._result
        raise self._result or Ambiguous(f"no result for {self._shown}")

    def _cut_off(self) -> bool | None:
        """Stop the helper; True if it had started sending, None if it had already ended."""
        with self._lock:
            if self._finished:
                return None
            self._cut = True
            sock = self._sock or self._conn.sock
            # OSError: closed already, or not connected yet. The plain socket's shutdown:
            # SSLSocket's would unwrap the TLS state under the helper's read.
            if sock is not None:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
            return self._sending

    def _left(self) -> float:
        return max(self._deadline - time.monotonic(), 0.001)

    def _talk(self) -> None:
        conn = self._conn
        try:
            try:
                if conn.sock is None:  # a new connection, not a kept one
                    conn.timeout = self._left()
                    conn.connect()
            except Exception as exc:
                self._fail(NotSent, f"before sending {self._shown}", exc)
                return
            with self._lock:
                if self._cut:
                    return
                self._sending, self._sock = True, conn.sock
            try:
                self._result = self._send_and_read(conn.sock)
            except Exception as exc:  # whatever broke, the request may have arrived
                self._fail(Ambiguous, f"after sending {self._shown}", exc)
        finally:
            with self._lock:
                self._finished = True
                if self._keep_s > 0 and not self._cut:
                    self._pool.give(conn, self._keep_s)
                else:
                    conn.close()

    def _send_and_read(self, sock: socket.socket) -> _Reply:
        conn = self._conn
        sock.settimeout(self._left())
        conn.request(self._method, self._path, body=self._body, headers=self._headers)
        sock.settimeout(self._left())
        with conn.getresponse() as response:
            sock.settimeout(self._left())
            text = response.read(MAX_RESPONSE_BYTES).decode("utf-8", "replace")
            # Read to its end (the response closed itself) and the server keeps it open.
            # Never after a 1xx: http.client (3.11 here) skips only 100 Continue and takes
            # 102/103 for the final answer, whose real final answer is still to come.
            if (response.status >= 200 and response.isclosed() and not response.will_close
                    and conn.sock is not None):
                self._keep_s = _keep_seconds(response.getheader("Keep-Alive"))
        return _Reply(response.status, text)

    def _fail(self, kind: type[TargetError], when: str, exc: Exception) -> None:
        # A socket or TLS error's text is the local system's; an http.client error's can be
        # the server's (BadStatusLine quotes the line it could not parse).
        said = str(exc) if isinstance(exc, OSError) else withheld("message", str(exc))
        error = kind(f"{type(exc).__name__} {when}: {said}")
        error.__cause__ = exc  # as ``raise ... from exc`` would, for the log's traceback
        self._result = error


# --- the target -------------------------------------------------------------------------------


@dataclass
class HttpTarget(Target):
    """An HTTP API with an ``Idempotency-Key`` header. Every call is bounded by its
    ``timeout_s`` in wall-clock time; the module docstring gives the outcome of each status.

    ``deduplicates`` is a declaration: only if the API documents that it refuses a second
    effect for one key and returns the original response.
    """

    name: str
    base_url: str
    apply_path: str = "/v1/payments"
    lookup_path: str | None = "/v1/payments/by-key/{key}"  # None: the API has no lookup
    deduplicates: bool = False
    id_field: str = "id"  # dotted path to the receipt id in a 2xx body
    not_applied_statuses: frozenset[int] = frozenset()
    headers: dict[str, str] = field(default_factory=dict)
    lookup_key_encoding: str = "segment"  # a key of KEY_ENCODINGS
    failed_statuses: frozenset[int] = frozenset()
    unknown_statuses: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        self.queryable = self.lookup_path is not None
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL must be http(s)://host[:port], got {self.base_url!r}")
        self._https, self._host, self._port = parts.scheme == "https", parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self._pool = _Pool(self._connection)
        check_path(self.apply_path)
        if self.lookup_path is not None:
            check_lookup_template(self.lookup_path)
        if self.lookup_key_encoding not in KEY_ENCODINGS:
            raise ValueError(f"lookup key encoding must be one of {', '.join(KEY_ENCODINGS)}, "
                             f"got {self.lookup_key_encoding!r}")
        check_id_field(self.id_field)
        self._declare_statuses()

    def _declare_statuses(self) -> None:
        declared = {"not applied": check_statuses(self.not_applied_statuses),
                    "failed": check_statuses(self.failed_statuses),
                    "unknown": check_statuses(self.unknown_statuses)}
        self.not_applied_statuses = declared["not applied"]
        self.failed_statuses, self.unknown_statuses = declared["failed"], declared["unknown"]
        seen: dict[int, str] = {}
        for meaning, codes in declared.items():
            for code in sorted(codes):
                if code in seen:
                    raise ValueError(f"HTTP {code} is declared both {seen[code]} and {meaning}")
                seen[code] = meaning

    def status_outcome(self, status: int) -> tuple[OutcomeStatus, str]:
        """The outcome of a non-2xx answer to ``apply``, and why (for the error message)."""
        if status in self.not_applied_statuses:
            return OutcomeStatus.NOT_APPLIED, "declared not applied"
        if status in self.failed_statuses:
            return OutcomeStatus.FAILED, "declared failed"
        if status in self.unknown_statuses:
            return OutcomeStatus.UNKNOWN, "declared unknown"
        if 400 <= status < 500 and status not in TRANSIENT_4XX:
            return OutcomeStatus.FAILED, "refused"
        return OutcomeStatus.UNKNOWN, "unknown unless declared"

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port)

    def _call(self, method: str, path: str, shown_path: str, body: bytes | None,
              headers: dict[str, str], timeout_s: float) -> _Reply:
        path, shown_path = self._prefix + path, self._prefix + shown_path
        return _Exchange(self._pool, method, path, shown_path, body, headers).run(timeout_s)

    def close(self) -> None:
        self._pool.close()

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        body = json.dumps(request.args, sort_keys=True, separators=(",", ":")).encode()
        headers = {**self.headers, **tracing.http_headers(), "Content-Type":
                   "application/json", "Idempotency-Key": request.key,
                   "X-Attempt-Id": request.attempt_id}
        reply = self._call("POST", self.apply_path, self.apply_path, body, headers, timeout_s)
        if not 200 <= reply.status < 300:
            outcome, why = self.status_outcome(reply.status)
            raise Refused(reply.status, outcome, why, reply.text)
        try:
            return receipt_id(reply.text, self.id_field)
        except ValueError as exc:  # the effect may well have happened
            raise Ambiguous(f"HTTP {reply.status} without a receipt id: {exc}") from exc

    def classify(self, error: Exception) -> OutcomeStatus:
        if isinstance(error, NotSent):
            return OutcomeStatus.NOT_APPLIED
        if isinstance(error, Refused):
            return error.outcome
        return OutcomeStatus.UNKNOWN

    def lookup(self, key: str, timeout_s: float) -> str | None:
        """The receipt id for ``key``; None only on a 404. Raises LookupUnavailable for
        anything else (no lookup path, a cut or failed call, another status, no id)."""
        if self.lookup_path is None:
            raise LookupUnavailable(f"{self.name} has no lookup by key")
        path = self.lookup_path.replace("{key}", KEY_ENCODINGS[self.lookup_key_encoding](key))
        try:  # the messages show the template, not the key
            reply = self._call("GET", path, self.lookup_path, None, dict(self.headers),
                               timeout_s)
        except (NotSent, Ambiguous) as exc:
            raise LookupUnavailable(f"lookup: {exc}") from exc
        if reply.status == 404:
            return None
        if not 200 <= reply.status < 300:
            raise LookupUnavailable(f"lookup answered HTTP {reply.status}, "
                                    f"{withheld('body', reply.text)}")
        try:
            return receipt_id(reply.text, self.id_field)
        except ValueError as exc:
            raise LookupUnavailable(f"lookup answered HTTP {reply.status} without a receipt "
                                    f"id: {exc}") from exc
