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

Connections are kept alive between calls when the server allows it (when one is kept and
used again: connectors/http_exchange.py). ``start_apply`` runs a call on a kept connection
on this target's exchange loop (connectors/http_loop.py), with the same outcomes.
"""

from __future__ import annotations

import contextlib
import http.client
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit

from connectors import http_exchange
from connectors.http_exchange import (
    Ambiguous,
    Exchange,
    NotSent,
    Pool,
    Reply,
    host_header,
    keep_seconds,
)
from connectors.http_loop import ExchangeLoop, Flight
from connectors.http_wire import RequestTemplate, request_bytes
from ledger_stream import tracing
from ledger_stream.connector.redaction import basic_auth, url_port, withheld, without_password
from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target, TargetError
from ledger_stream.domain.events import OutcomeStatus

# How ``{key}`` is filled in a lookup path template.
KEY_ENCODINGS: dict[str, Callable[[str], str]] = {
    "segment": lambda key: quote(key, safe=""),  # one path segment: "/" becomes %2F
    "path": lambda key: quote(key, safe="/"),  # "/" stays a path separator
    "query": lambda key: quote_plus(key, safe=""),  # a query string value
}
TRANSIENT_4XX = frozenset({408, 429})  # unknown unless declared: see the module docstring


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


# --- the target -------------------------------------------------------------------------------


@dataclass(repr=False)
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

    def __repr__(self) -> str:
        # Never the URL's password, nor the headers (an Authorization or API key header).
        return (f"HttpTarget(name={self.name!r}, base_url={without_password(self.base_url)!r}"
                f", apply_path={self.apply_path!r}, deduplicates={self.deduplicates!r})")

    def __post_init__(self) -> None:
        self.queryable = self.lookup_path is not None
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base URL must be http(s)://host[:port], got "
                             f"{without_password(self.base_url)!r}")
        self._https, self._host = parts.scheme == "https", parts.hostname
        self._port = url_port(parts)  # ValueError without the password
        auth = basic_auth(self.base_url)[1]  # user:password@ in the URL: basic auth
        if auth is not None and "Authorization" not in self.headers:
            self.headers = {**self.headers, "Authorization": auth}
        self._prefix = parts.path.rstrip("/")
        self._pool = Pool(self._connection)
        self._loop = ExchangeLoop(f"{self.name}-http")
        self._host_line = host_header(self._connection())  # no socket until connect()
        check_path(self.apply_path)
        if self.lookup_path is not None:
            check_lookup_template(self.lookup_path)
        if self.lookup_key_encoding not in KEY_ENCODINGS:
            raise ValueError(f"lookup key encoding must be one of {', '.join(KEY_ENCODINGS)}, "
                             f"got {self.lookup_key_encoding!r}")
        check_id_field(self.id_field)
        self._declare_statuses()
        self._template: RequestTemplate | None = None  # see _apply_wire
        self._template_headers: dict[str, str] | None = None  # what it was built from

    def _current_template(self) -> RequestTemplate | None:
        """The template for ``headers`` as they are now (built again after a change, such
        as a rotated token); None for headers it cannot hold (the general path)."""
        if self._template_headers != self.headers:
            self._template_headers, self._template = dict(self.headers), None
            with contextlib.suppress(ValueError):
                self._template = RequestTemplate(
                    "POST", self._prefix + self.apply_path, self._host_line,
                    {**self.headers, "Content-Type": "application/json"},
                    ("Idempotency-Key", "X-Attempt-Id"))
        return self._template

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
              headers: dict[str, str], timeout_s: float) -> Reply:
        path, shown_path = self._prefix + path, self._prefix + shown_path
        return Exchange(self._pool, method, path, shown_path, body, headers).run(timeout_s)

    def close(self) -> None:
        self._loop.close()
        self._pool.close()

    def _apply_request(self, request: EffectRequest) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(request.args, sort_keys=True, separators=(",", ":")).encode()
        headers = {**self.headers, **tracing.http_headers(), "Content-Type":
                   "application/json", "Idempotency-Key": request.key,
                   "X-Attempt-Id": request.attempt_id}
        return body, headers

    def _apply_wire(self, request: EffectRequest) -> bytes:
        """The bytes ``apply`` sends for ``request``; the fixed headers checked and encoded
        once (``RequestTemplate``), unless a trace context or a header of the target's own
        (one of those set per call) asks for the general path. ValueError as there."""
        extra = tracing.http_headers()
        template = self._current_template()
        if template is None or extra:
            body, headers = self._apply_request(request)
            return request_bytes("POST", self._prefix + self.apply_path, self._host_line,
                                 headers, body)
        body = json.dumps(request.args, sort_keys=True, separators=(",", ":")).encode()
        return template.render((request.key, request.attempt_id), body)

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        body, headers = self._apply_request(request)
        reply = self._call("POST", self.apply_path, self.apply_path, body, headers, timeout_s)
        return self._receipt(reply)

    def start_apply(self, request: EffectRequest, timeout_s: float,
                    done: Callable[[str, Exception | None], None]) -> bool:
        """``apply`` on a kept connection, run by this target's exchange loop
        (connectors/http_loop.py) with the same outcomes. False when no connection is kept
        (opening one may wait on DNS beyond any deadline: ``apply`` on a thread does it) or
        the request would be refused before sending (``apply`` raises that NotSent)."""
        try:
            wire = self._apply_wire(request)
        except ValueError:
            return False  # apply() refuses it before sending, with its reason
        conn = self._pool.take_kept()
        if conn is None:
            return False

        def finished(result: Reply | TargetError) -> None:
            if isinstance(result, TargetError):
                done("", result)
                return
            try:
                receipt = self._receipt(result)
            except TargetError as exc:
                done("", exc)
                return
            done(receipt, None)

        flight = Flight(conn, wire, "POST", f"POST {self._prefix}{self.apply_path}",
                        timeout_s, http_exchange.MAX_RESPONSE_BYTES, finished,
                        self._pool.give, keep_seconds)
        if self._loop.start(flight):
            return True
        conn.close()  # the target is closing
        return False

    def _receipt(self, reply: Reply) -> str:
        """The receipt id of an answer to ``apply``; raises what it means otherwise."""
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
