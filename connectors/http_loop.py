"""Exchanges on kept-alive connections run by one thread with non-blocking sockets: what
``connectors.http.HttpTarget.start_apply`` sends its calls through.

A thread per call in flight cost more CPU than the call's own bytes: each wait and each
answer handed the interpreter's lock from thread to thread, with a system call or two each
time. Here the caller's thread writes the request (non-blocking: a request fits in the
socket's buffer) and one thread waits on every connection in flight at once (``epoll``,
each connection armed once per request) and parses each answer as it arrives
(connectors/http_wire.py). It looks at its deadlines at least every ``LATE_S`` and is woken
by a byte on a socket pair only for a deadline sooner than its next look, so a call costs a
send, an arm, a wait, a receive and a parse. Without ``select.epoll`` (not Linux) nothing
is run here: ``start`` says so.

The guarantees of ``connectors.http_exchange.Exchange`` hold unchanged:

- a call whose deadline passes before its first byte is written fails ``NotSent``; once
  writing has begun, any failure or the deadline is ``Ambiguous`` (the effect may have
  happened), never retried here;
- the whole exchange ends by its deadline (wall clock): at the deadline the connection is
  closed and never used again;
- a connection goes back to the pool only if its answer was read to its delimited end,
  nothing else came after it and the server keeps it open;
- an error's message never quotes the server (``redaction.withheld``).

Only connections already open are run here: opening one may wait on a DNS lookup, which no
deadline can cut, so that stays on a caller's thread (``Exchange``).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.client import HTTPConnection

from connectors.http_deadlines import DeadlineHeap
from connectors.http_wire import MAX_HEAD_BYTES, RECV_BYTES, NeedMore, parse_received
from ledger_stream.connector.redaction import withheld
from ledger_stream.connector.target import TargetError

logger = logging.getLogger(__name__)

# The loop looks at its deadlines at least this often, so a start() wakes it only for a
# deadline sooner than its next look (a byte written and read per call cost two system
# calls and a thread switch).
LATE_S = 0.05
_WAIT_TO_WRITE = (BlockingIOError, InterruptedError, ssl.SSLWantWriteError,
                  ssl.SSLWantReadError)


class NotSent(TargetError):
    """The request never left: no effect. (Re-exported by ``http_exchange``.)"""


class Ambiguous(TargetError):
    """The request may have reached the API; whether it applied is unknown."""


@dataclass(frozen=True)
class Reply:
    status: int
    text: str


Finished = Callable[[Reply | TargetError], None]


@dataclass(eq=False)
class Flight:
    """One request on a kept connection and what has been received of its answer.
    ``done`` is called once, on the loop's thread, with the reply or the error."""

    conn: HTTPConnection
    request: bytes
    method: str
    shown: str  # "POST /v1/payments": the request line as messages show it (no key)
    timeout_s: float
    limit: int  # the most body bytes read
    done: Finished
    keep: Callable[[HTTPConnection, float], None]  # hands a reusable connection back
    keep_seconds: Callable[[str | None], float]
    deadline: float = 0.0
    sent: int = 0
    sending: bool = False  # a byte may have left: from now on the outcome is unknown
    received: bytearray = field(default_factory=bytearray)
    written: bool = False  # ``start`` is done writing: the loop may cut it
    finished: bool = False  # left the loop: nothing to read or cut any more
    reported: bool = False  # ``done`` called (once: under the loop's lock)

    @property
    def ended(self) -> bool:  # for DeadlineHeap: nothing left to cut
        return self.finished


class ExchangeLoop:
    """One daemon thread, started at the first call, reading the answers of every ``Flight``
    given to ``start``. ``close`` refuses new flights; the ones on the wire finish (or meet
    their deadline), then the thread ends."""

    def __init__(self, name: str = "http-loop") -> None:
        self._name = name
        self._lock = threading.Lock()  # guards the fields below between the two threads
        self._flights: dict[int, Flight] = {}  # descriptor -> the flight on it
        self._deadlines: DeadlineHeap[Flight] = DeadlineHeap()
        self._wake_at = float("inf")  # the loop waits until then; -inf: it is not waiting
        self._closed = not hasattr(select, "epoll")
        self._stopped = False  # the thread has ended: flights still being written end here
        self._thread: threading.Thread | None = None
        self._epoll: select.epoll | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None

    def start(self, flight: Flight) -> bool:
        """Write ``flight``'s request on this thread and leave its answer to the loop.
        False when closed (or without epoll): nothing sent, ``done`` never called. Else
        ``done`` is called exactly once: here already if writing failed, else by the loop."""
        flight.deadline = time.monotonic() + flight.timeout_s
        sock = flight.conn.sock
        with self._lock:
            if self._closed or sock is None:
                return False
            if self._thread is None:
                self._begin_thread()
            fd = sock.fileno()
            self._flights[fd] = flight
        try:
            if sock.gettimeout() != 0.0:
                sock.setblocking(False)
            flight.sending = True
            with contextlib.suppress(*_WAIT_TO_WRITE):  # the rest when it may be written
                flight.sent = sock.send(flight.request)
            self._arm(fd, flight)
        except Exception as exc:  # noqa: BLE001 - whatever broke, the request may have arrived
            with self._lock:
                self._flights.pop(fd, None)
            kind, when = (Ambiguous, "after") if flight.sending else (NotSent, "before")
            self._fail(flight, kind, f"{when} sending {flight.shown}", exc)
            return True
        with self._lock:  # only now may the loop cut it: no write of ours is under way
            stopped, flight.written = self._stopped, True
            if not stopped:
                self._deadlines.push(flight.deadline, flight)
            wake = not stopped and flight.deadline < self._wake_at
            if wake:
                self._wake_at = flight.deadline
        if stopped:  # the loop's thread ended while this was written: nobody reads it
            self._forget(flight)
            flight.conn.close()
            self._finish(flight, Ambiguous(f"the exchange loop stopped after sending "
                                           f"{flight.shown}"))
        elif wake:
            self._wake()
        return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            running = self._thread is not None
        if running:
            self._wake()

    def watched(self) -> int:
        """Deadlines held (the finished ones are pruned): a test's view of memory."""
        with self._lock:
            return len(self._deadlines)

    def _begin_thread(self) -> None:
        self._epoll = select.epoll()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._epoll.register(self._wake_r.fileno(), select.EPOLLIN)
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        assert self._wake_w is not None
        with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
            self._wake_w.send(b"\0")

    def _arm(self, fd: int, flight: Flight) -> None:
        """Watch ``fd`` for this flight's next event, once (a kept connection stays
        registered between requests, disarmed; a closed one leaves the set by itself)."""
        assert self._epoll is not None
        events = select.EPOLLIN | select.EPOLLONESHOT
        if flight.sent < len(flight.request):
            events |= select.EPOLLOUT
        try:
            self._epoll.modify(fd, events)
        except FileNotFoundError:
            self._epoll.register(fd, events)

    # --- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        assert self._epoll is not None and self._wake_r is not None
        wake_fd = self._wake_r.fileno()
        try:
            while True:
                with self._lock:
                    if self._closed and not self._flights:
                        return
                    due = self._deadlines.due(time.monotonic())
                    next_at = self._deadlines.next_at() if not due else None
                    now = time.monotonic()
                    self._wake_at = float("-inf") if due else \
                        min(now + LATE_S, float("inf") if next_at is None else next_at)
                for flight in due:
                    self._expire(flight)
                if due:
                    continue
                timeout = LATE_S if next_at is None else \
                    min(max(next_at - time.monotonic(), 0.0), LATE_S)
                events = self._epoll.poll(timeout)
                with self._lock:
                    self._wake_at = float("-inf")  # awake: a start() needs no wake-up byte
                for fd, mask in events:
                    if fd == wake_fd:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    elif (found := self._flights.get(fd)) is not None:
                        self._serve(fd, found, mask)
        except BaseException:  # noqa: BLE001 - logged; the flights left are cut below
            logger.exception("the HTTP exchange loop failed")
            raise
        finally:
            self._release()

    def _release(self) -> None:
        """The loop ends: every flight still here is cut, its outcome as at a deadline; one
        that ``start`` is still writing is cut by ``start`` once written (cut now, it could
        be reported NotSent as its first byte leaves)."""
        with self._lock:
            self._closed = self._stopped = True
            flights = [f for f in self._flights.values() if f.written]
        for flight in flights:
            self._expire(flight)
        for closable in (self._epoll, self._wake_r, self._wake_w):
            if closable is not None:
                closable.close()

    # --- one flight -----------------------------------------------------------------------

    def _serve(self, fd: int, flight: Flight, mask: int) -> None:
        if flight.sent < len(flight.request):
            try:
                flight.sent += flight.conn.sock.send(flight.request[flight.sent:])
            except _WAIT_TO_WRITE:
                pass
            except Exception as exc:  # noqa: BLE001 - the request may have arrived
                self._fail(flight, Ambiguous, f"after sending {flight.shown}", exc)
                return
            if flight.sent < len(flight.request) or not mask & select.EPOLLIN:
                self._rearm(fd, flight)
                return
        self._read(fd, flight)

    def _rearm(self, fd: int, flight: Flight) -> None:
        try:
            self._arm(fd, flight)
        except OSError as exc:
            self._fail(flight, Ambiguous, f"after sending {flight.shown}", exc)

    def _read(self, fd: int, flight: Flight) -> None:
        sock, ended = flight.conn.sock, False
        try:
            chunk = sock.recv(RECV_BYTES)
            ended = not chunk
            flight.received += chunk
            pending = getattr(sock, "pending", None)  # TLS: bytes decrypted already
            while not ended and pending is not None and pending():
                flight.received += sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                ssl.SSLWantWriteError):
            self._rearm(fd, flight)
            return
        except Exception as exc:  # noqa: BLE001 - the request went out: unknown
            self._fail(flight, Ambiguous, f"after sending {flight.shown}", exc)
            return
        if len(flight.received) > flight.limit + MAX_HEAD_BYTES + RECV_BYTES:
            ended = True  # enough of a body without a length: cut, the connection not kept
        try:
            answer = parse_received(bytes(flight.received), ended, flight.limit, flight.method)
        except NeedMore:
            self._rearm(fd, flight)
            return
        except Exception as exc:  # noqa: BLE001 - a malformed answer: unknown
            self._fail(flight, Ambiguous, f"after sending {flight.shown}", exc)
            return
        self._forget(flight)
        if answer.keep:
            flight.keep(flight.conn, flight.keep_seconds(answer.keep_alive))
        else:
            flight.conn.close()
        self._finish(flight, Reply(answer.status, answer.body.decode("utf-8", "replace")))

    def _expire(self, flight: Flight) -> None:
        if flight.finished:
            return
        self._forget(flight)
        flight.conn.close()
        if flight.sending:
            error: TargetError = Ambiguous(f"Deadline after sending {flight.shown}: no "
                                           f"complete response within {flight.timeout_s:g} s")
        else:
            error = NotSent(f"Deadline before sending {flight.shown}: not started within "
                            f"{flight.timeout_s:g} s")
        self._finish(flight, error)

    def _fail(self, flight: Flight, kind: type[TargetError], when: str,
              exc: Exception) -> None:
        self._forget(flight)
        flight.conn.close()
        # A socket or TLS error's text is the local system's; another's is withheld, as a
        # parse error's could quote the server.
        said = str(exc) if isinstance(exc, OSError) else withheld("message", str(exc))
        error = kind(f"{type(exc).__name__} {when}: {said}")
        error.__cause__ = exc
        self._finish(flight, error)

    def _forget(self, flight: Flight) -> None:
        """The flight leaves the loop (before its connection is closed or kept)."""
        with self._lock:
            sock = flight.conn.sock
            if sock is not None and self._flights.get(sock.fileno()) is flight:
                del self._flights[sock.fileno()]
            flight.finished = True
            self._deadlines.discard(flight)

    def _finish(self, flight: Flight, result: Reply | TargetError) -> None:
        with self._lock:  # the loop's end and ``start`` may both reach here: once only
            if flight.reported:
                return
            flight.finished = flight.reported = True
        try:
            flight.done(result)
        except Exception:  # noqa: BLE001 - the caller's bug must not stop the other flights
            logger.exception("an HTTP call's completion failed")
