"""The SDK's side of the receipts view: one keep-alive HTTP connection per thread."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import quote, urlsplit

from ledger_stream.domain.events import Receipt
from ledger_stream.sdk.errors import StaleStatusError, ViewUnavailableError
from ledger_stream.serde.records import from_record


class ViewClient:
    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the view URL must be http://HOST[:PORT], got {url!r}")
        self._host, self._port = parts.hostname, parts.port or 80
        self._base = parts.path.rstrip("/")
        self._timeout_s = timeout_s
        self._local = threading.local()
        self.url = url

    def status(self, key: str, after: int, wait_s: float) -> Receipt | None:
        """The key's latest receipt once the view has applied its partition up to ``after``.
        Raises StaleStatusError when it had not within ``wait_s``; ViewUnavailableError
        when the view cannot be asked."""
        path = (f"{self._base}/v1/operations/{quote(key, safe='')}"
                f"?after={after}&wait_ms={int(wait_s * 1000)}")
        body = self._get(path, wait_s)
        if not body["caught_up"]:
            raise StaleStatusError(key, body["position"], after)
        record = body["receipt"]
        return None if record is None else from_record(Receipt, record)

    def _get(self, path: str, wait_s: float) -> dict[str, Any]:
        for attempt in (1, 2):  # a kept-alive connection the server closed: one new try
            conn = self._connection(wait_s)
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise ViewUnavailableError(f"the view at {self.url} cannot be reached: "
                                               f"{exc}") from exc
                continue
            if response.status != 200:
                raise ViewUnavailableError(f"the view at {self.url} answered "
                                           f"{response.status}: {data[:300]!r}")
            result: dict[str, Any] = json.loads(data)
            return result
        raise AssertionError("unreachable")

    def _connection(self, wait_s: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self._host, self._port,
                                              timeout=self._timeout_s + wait_s)
            self._local.conn = conn
        return conn
