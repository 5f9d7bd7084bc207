"""One HTTP request and its response within a wall-clock deadline, over kept-alive
connections: what ``connectors.http.HttpTarget`` sends its calls through.

The phase a call reached decides its error: ``NotSent`` when the request had not started to
leave (no effect), ``Ambiguous`` once it may have (the effect may have happened). A
connection is kept for another call only when its response was read to its end, the server
keeps it open and the call was not cut at its deadline; it is used again only if idle less
than ``KEEP_IDLE_S`` (and half the server's own ``Keep-Alive: timeout``) with nothing to
read (a server that closed it has sent its end-of-stream): a request sent on a connection
the server closes at the same moment fails after sending, which is ``unknown`` and sends the
key to reconciliation, never a wrong ``not_applied``.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable

from connectors.http_deadlines import Deadlines
from connectors.http_loop import Ambiguous, NotSent, Reply
from connectors.http_wire import read_answer, request_bytes
from ledger_stream.connector.redaction import withheld
from ledger_stream.connector.target import TargetError

MAX_RESPONSE_BYTES = 1 << 20  # a larger 2xx body is cut, fails to parse: unknown
# A kept connection idle longer is closed, not used: servers close idle connections after a
# few seconds (gunicorn 2 s, Node 5 s), and one closed as a request goes out makes the call
# unknown. A server's ``Keep-Alive: timeout=N`` shortens it to N/2.
KEEP_IDLE_S = 1.0
MAX_KEPT = 256  # idle connections per target; one per call in flight is enough


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


def keep_seconds(keep_alive: str | None) -> float:
    """How long to keep a connection: KEEP_IDLE_S, or half the server's ``Keep-Alive:
    timeout=N`` if that is shorter."""
    if not keep_alive:
        return KEEP_IDLE_S
    for part in keep_alive.split(","):
        name, _, value = part.partition("=")
        if name.strip().lower() == "timeout":
            try:
                return min(KEEP_IDLE_S, max(float(value.strip()), 0.0) / 2)
            except ValueError:
                break
    return KEEP_IDLE_S


class Pool:
    """Idle keep-alive connections to one server, the most recently used taken first."""

    def __init__(self, make: Callable[[], http.client.HTTPConnection]) -> None:
        self._make = make
        # (conn, stale at), in the order given back: the stalest first, as a server's idle
        # timeout (and so the keep time) is the same for all its connections.
        self._idle: deque[tuple[http.client.HTTPConnection, float]] = deque()
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> http.client.HTTPConnection:
        """A kept connection still fit to use, else a new one (not yet connected)."""
        return self.take_kept() or self._make()

    def take_kept(self) -> http.client.HTTPConnection | None:
        """A kept connection still fit to use, if there is one."""
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, stale_at = self._idle.pop()
                # Close the other stale ones now rather than at their turn: from the front
                # (a scan of every kept connection cost ~20 µs a call at 256 kept).
                now = time.monotonic()
                stale = []
                while self._idle and now >= self._idle[0][1]:
                    stale.append(self._idle.popleft()[0])
            for old in stale:
                old.close()
            if now < stale_at and not _dropped(conn):
                return conn
            conn.close()
        return None

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
            idle, self._idle = self._idle, deque()
        for conn, _ in idle:
            conn.close()


def host_header(conn: http.client.HTTPConnection) -> str:
    """``Host`` as http.client writes it: the port only when not the scheme's default."""
    host = f"[{conn.host}]" if ":" in conn.host else conn.host
    return host if conn.port == conn.default_port else f"{host}:{conn.port}"


DEADLINES = Deadlines()


# --- one bounded exchange ---------------------------------------------------------------------


class Exchange:
    """One request and its response within ``timeout_s`` seconds of wall-clock time in all.

    A socket timeout bounds each wait, not their sum: a server trickling its answer a byte
    at a time kept a 1 s call alive 2.8 s, past the lease. So each step takes the time left
    as its socket timeout, and the exchange is cut at its deadline: the socket is shut down,
    which ends a blocked read or write, and a connection still being made may not send. On
    a kept connection the caller's thread does the I/O and ``DEADLINES`` cuts it. A new
    connection is made by a helper thread that the caller stops waiting for at the deadline
    (a DNS lookup obeys no socket timeout, so that helper may linger, but it never sends).
    ``run`` raises NotSent when the request had not started to leave, Ambiguous when it had.

    ``conn`` comes from ``pool``, connected (kept alive) or not; it goes back to the pool only
    if its response was read to the end, the server keeps it open, and it was not cut.
    """

    def __init__(self, pool: Pool, method: str, path: str,
                 shown_path: str, body: bytes | None, headers: dict[str, str]) -> None:
        self._pool, self._conn = pool, pool.take()
        self._method, self._path, self._body = method, path, body
        self._headers, self._shown = headers, f"{method} {shown_path}"
        self._lock = threading.Lock()  # orders "cut" against "start sending" and the end
        self._sending = self._cut = self._finished = self._watched = False
        self._keep_s = 0.0  # how long the connection may be kept after this exchange
        self._sock: socket.socket | None = None  # kept: getresponse() may drop conn.sock
        self._result: Reply | TargetError | None = None
        self._deadline = 0.0

    def run(self, timeout_s: float) -> Reply:
        self._deadline = time.monotonic() + timeout_s
        if self._conn.sock is not None:  # kept: connected, so no DNS lookup to outlast
            self._watched = True
            DEADLINES.watch(self._deadline, self)
            self._talk()
            sending: bool | None = self._sending if self._cut else None
        else:
            helper = threading.Thread(target=self._talk, name="http-call", daemon=True)
            helper.start()
            helper.join(timeout_s)
            sending = self.cut_off() if helper.is_alive() else None
            # None: the helper ended between the join and the cut; its result stands.
        if sending:
            raise Ambiguous(f"Deadline after sending {self._shown}: "
                            f"no complete response within {timeout_s:g} s")
        if sending is not None:
            raise NotSent(f"Deadline before sending {self._shown}: "
                          f"no connection within {timeout_s:g} s")
        if isinstance(self._result, Reply):
            return self._result
        raise self._result or Ambiguous(f"no result for {self._shown}")

    @property
    def ended(self) -> bool:
        return self._finished

    def cut_off(self) -> bool | None:
        """Stop the I/O; True if it had started sending, None if it had already ended."""
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
            try:  # refused here (a bad path or header): nothing left
                request = request_bytes(self._method, self._path, host_header(conn),
                                        self._headers, self._body)
            except ValueError as exc:
                self._fail(NotSent, f"before sending {self._shown}", exc)
                return
            with self._lock:
                if self._cut:
                    return
                self._sending, self._sock = True, conn.sock
            try:
                self._result = self._send_and_read(conn.sock, request)
            except Exception as exc:  # whatever broke, the request may have arrived
                self._fail(Ambiguous, f"after sending {self._shown}", exc)
        finally:
            with self._lock:
                self._finished = True
                if self._watched:
                    DEADLINES.release(self)
                if self._keep_s > 0 and not self._cut:
                    self._pool.give(conn, self._keep_s)
                else:
                    conn.close()

    def _send_and_read(self, sock: socket.socket, request: bytes) -> Reply:
        """Write the request at once, read its answer (connectors/http_wire.py)."""
        sock.settimeout(self._left())
        sock.sendall(request)
        answer = read_answer(sock, self._left, MAX_RESPONSE_BYTES, self._method)
        if answer.keep:
            self._keep_s = keep_seconds(answer.keep_alive)
        return Reply(answer.status, answer.body.decode("utf-8", "replace"))

    def _fail(self, kind: type[TargetError], when: str, exc: Exception) -> None:
        # A socket or TLS error's text is the local system's; another's is withheld, as an
        # http.client error's can be the server's (its BadStatusLine quotes the line).
        said = str(exc) if isinstance(exc, OSError) else withheld("message", str(exc))
        error = kind(f"{type(exc).__name__} {when}: {said}")
        error.__cause__ = exc  # as ``raise ... from exc`` would, for the log's traceback
        self._result = error
