"""HTTP APIs that take an idempotency key header (Stripe-like payments APIs, the sandbox).

The operation key goes in ``Idempotency-Key`` and the attempt id in ``X-Attempt-Id``. The
request's phases decide the outcome of a failure: nothing sent (connection refused, DNS,
connect timeout) is ``not_applied``; anything after the request may have left (read
timeout, dropped connection) is ``unknown``; a 429/503 answer is ``not_applied`` (the API
says it did not process the request); 409 and other 4xx are permanent; other 5xx are
``unknown``, since an API may fail after committing.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target, TargetError
from ledger_stream.domain.events import OutcomeStatus


class NotSent(TargetError):
    """The request never left: no effect."""


class Ambiguous(TargetError):
    """The request may have reached the API; whether it applied is unknown."""


class Refused(TargetError):
    """The API answered with an error status."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:200]}")
        self.status = status


@dataclass
class HttpTarget(Target):
    name: str
    base_url: str
    apply_path: str = "/v1/payments"
    lookup_path: str | None = "/v1/payments/by-key/{key}"  # None: the API has no lookup
    deduplicates: bool = True
    id_field: str = "id"
    not_applied_statuses: frozenset[int] = field(default_factory=lambda: frozenset({429, 503}))
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.queryable = self.lookup_path is not None
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL must be http(s)://host[:port], got {self.base_url!r}")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")

    def _connect(self, timeout_s: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._scheme == "https" else \
            http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout_s)
        try:
            conn.connect()
        except OSError as exc:
            conn.close()
            raise NotSent(f"cannot connect to {self.name}: {exc}") from exc
        return conn

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        body = json.dumps(request.args, sort_keys=True, separators=(",", ":")).encode()
        headers = {**self.headers, "Content-Type": "application/json",
                   "Idempotency-Key": request.key, "X-Attempt-Id": request.attempt_id}
        conn = self._connect(timeout_s)
        try:
            conn.request("POST", self._prefix + self.apply_path, body=body, headers=headers)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            raise Ambiguous(f"{type(exc).__name__} after sending: {exc}") from exc
        finally:
            conn.close()
        if response.status >= 300:
            raise Refused(response.status, text)
        return self._receipt_id(text)

    def _receipt_id(self, text: str) -> str:
        try:
            return str(json.loads(text)[self.id_field])
        except (ValueError, KeyError, TypeError) as exc:
            raise Ambiguous(f"2xx without a receipt id field {self.id_field!r}") from exc

    def classify(self, error: Exception) -> OutcomeStatus:
        if isinstance(error, NotSent):
            return OutcomeStatus.NOT_APPLIED
        if isinstance(error, Refused):
            if error.status in self.not_applied_statuses:
                return OutcomeStatus.NOT_APPLIED
            if 400 <= error.status < 500:
                return OutcomeStatus.FAILED
        return OutcomeStatus.UNKNOWN

    def lookup(self, key: str, timeout_s: float) -> str | None:
        if self.lookup_path is None:
            raise LookupUnavailable(f"{self.name} has no lookup by key")
        path = self._prefix + self.lookup_path.format(key=quote(key, safe=""))
        try:
            conn = self._connect(timeout_s)
        except NotSent as exc:
            raise LookupUnavailable(str(exc)) from exc
        try:
            conn.request("GET", path, headers=self.headers)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            raise LookupUnavailable(f"lookup failed: {exc}") from exc
        finally:
            conn.close()
        if response.status == 404:
            return None
        if response.status != 200:
            raise LookupUnavailable(f"lookup answered HTTP {response.status}")
        try:
            return self._receipt_id(text)
        except Ambiguous as exc:
            raise LookupUnavailable(str(exc)) from exc
