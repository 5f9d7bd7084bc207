"""The SDK's side of the receipts view: one keep-alive HTTP connection per thread.

The view answers the gateway's tenant API keys: a client sends its own (``key``,
``LEDGER_VIEW_KEY``); a server acting for many tenants (the gateway) sends its caller's
instead, set for the request with ``forwarding``.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit

from ledger_stream.connector.redaction import without_password
from ledger_stream.domain.events import OperatorResolution, Receipt
from ledger_stream.sdk.errors import (
    NoTimelineError,
    StaleStatusError,
    StaleTimelineError,
    ViewUnavailableError,
)
from ledger_stream.serde.records import from_record

MAX_WAIT_S = 30.0  # the view waits at most this long (server.MAX_WAIT_MS)
# The caller's API key, sent instead of the client's own while set (copied into the threads
# that asyncio.to_thread starts, as every context variable is).
_FORWARDED: ContextVar[str | None] = ContextVar("ledger_view_forwarded_key", default=None)


@contextmanager
def forwarding(key: str) -> Iterator[None]:
    """Within this block (and the threads it hands work to with ``asyncio.to_thread``),
    every ViewClient sends ``key``: the view then reads only ``key``'s tenant's keys."""
    token = _FORWARDED.set(key)
    try:
        yield
    finally:
        _FORWARDED.reset(token)


class ViewClient:
    def __init__(self, url: str, timeout_s: float = 10.0, key: str | None = None) -> None:
        """``key``: the API key sent to the view (one of its tenant keys)."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError("the view URL must be http://HOST[:PORT], got "
                             f"{without_password(url)!r}")
        self._host, self._port = parts.hostname, parts.port or 80
        self._base = parts.path.rstrip("/")
        self._timeout_s = timeout_s
        self._key = key
        self._local = threading.local()
        self.url = url
        self._shown = without_password(url)  # what errors name: no password

    def status(self, key: str, after: int, wait_s: float, *, topic: str = "",
               partition: int | None = None, partitions: int | None = None) -> Receipt | None:
        """The key's latest receipt once the view has applied its partition up to ``after``.
        ``topic``, ``partition`` and ``partitions`` say what ``after`` is an offset of: a
        view of another topic or partition count refuses (409) rather than compare it with
        an unrelated position. Raises StaleStatusError when the view had not caught up within
        ``wait_s``; ViewUnavailableError when it cannot be asked or refuses."""
        wait_s = min(max(wait_s, 0.0), MAX_WAIT_S)
        query: dict[str, int | str] = {"after": after, "wait_ms": int(wait_s * 1000)}
        if topic:
            query["topic"] = topic
        if partition is not None:
            query["partition"] = partition
        if partitions is not None:
            query["partitions"] = partitions
        path = f"{self._base}/v1/operations/{quote(key, safe='')}?{urlencode(query)}"
        body = self._get(path, wait_s)
        if not body["caught_up"]:
            raise StaleStatusError(key, body["position"], after)
        record = body["receipt"]
        return None if record is None else from_record(Receipt, record)

    def history(self, key: str, what: Literal["timeline", "evidence"], wait_s: float,
                limit: int = 1_000) -> dict[str, Any]:
        """The view's answer to ``GET /v1/{what}/{key}`` once it has applied every record of
        the key committed when this was called. StaleTimelineError when it had not within
        ``wait_s``; ViewUnavailableError when it cannot be asked or refuses (a view started
        with --no-timeline answers 404)."""
        wait_s = min(max(wait_s, 0.0), MAX_WAIT_S)
        path = (f"{self._base}/v1/{what}/{quote(key, safe='')}?"
                f"{urlencode({'fresh': 1, 'wait_ms': int(wait_s * 1000), 'limit': limit})}")
        body = self._get(path, wait_s)
        if not body["caught_up"]:
            raise StaleTimelineError(key, body["positions"])
        return body

    def decision(self, tenant: str, decision_id: str, wait_s: float,
                 ) -> OperatorResolution | None:
        """The tenant's operator decision recorded under ``decision_id`` on any of its keys,
        or None, as of every decision committed when this was called (StaleTimelineError:
        the view had not caught up within ``wait_s``; NoTimelineError: the view keeps no
        timeline; ViewUnavailableError)."""
        wait_s = min(max(wait_s, 0.0), MAX_WAIT_S)
        query = urlencode({"tenant": tenant, "wait_ms": int(wait_s * 1000)})
        body = self._get(f"{self._base}/v1/decisions/{quote(decision_id, safe='')}?{query}",
                         wait_s)
        if not body["caught_up"]:
            raise StaleTimelineError(f"decision {decision_id}", {})
        record = body["decision"]
        return None if record is None else from_record(OperatorResolution, record)

    def _get(self, path: str, wait_s: float) -> dict[str, Any]:
        for attempt in (1, 2):  # a kept-alive connection the server closed: one new try
            conn = self._connection(wait_s)
            try:
                key = _FORWARDED.get() or self._key
                conn.request("GET", path, headers={"Authorization": f"Bearer {key}"}
                             if key else {})
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conn = None
                if attempt == 2 or isinstance(exc, TimeoutError):  # no second wait
                    raise ViewUnavailableError(f"the view at {self._shown} cannot be reached: "
                                               f"{exc}") from exc
                continue
            if response.status == 404 and b"no timeline" in data:
                raise NoTimelineError(f"the view at {self._shown} keeps no timeline")
            if response.status in (401, 403):
                raise ViewUnavailableError(
                    f"the view at {self._shown} refused this client's API key "
                    f"({response.status}): set LEDGER_VIEW_KEY to a key of the tenant read")
            if response.status != 200:
                raise ViewUnavailableError(f"the view at {self._shown} answered "
                                           f"{response.status}: {data[:300]!r}")
            result: dict[str, Any] = json.loads(data)
            return result
        raise AssertionError("unreachable")

    def _connection(self, wait_s: float) -> http.client.HTTPConnection:
        """This thread's connection, its timeout set for this request's wait."""
        timeout = self._timeout_s + wait_s
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn
