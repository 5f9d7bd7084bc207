"""The view over HTTP (standard library server, one thread per connection, keep-alive; at
most ``max_connections`` at once, each closed once silent for ``idle_timeout_s``).

- ``GET /v1/operations/{key}[?after=OFFSET][&wait_ms=MS]``: the key's latest receipt as
  JSON (``receipt`` is null for a key with none), its partition, and the view's ``position``
  in it. With ``after``, the answer waits (up to ``wait_ms``, default 1000, at most 30000)
  until the view has applied the partition up to that offset; ``caught_up`` says whether it
  had (null without ``after``). ``topic``, ``partition`` and ``partitions`` name what
  ``after`` is an offset of; a view of another topic or partitioning answers 409.
- ``GET /v1/timeline/{key}[?fresh=1][&wait_ms=MS][&limit=N]``: the key's timeline (one row
  per record of it in every ledger topic, ``history.timeline``; the latest ``limit``, 1,000
  by default, ``truncated`` counting the earlier ones) from the view's timeline. With ``fresh``
  (the default) the view first catches up to the end offsets of the key's partitions as of
  the request; ``caught_up`` says whether it did (null with ``fresh=0``). ``positions``: the
  view's position in each of the key's partitions, ``topic/partition`` → offset.
- ``GET /v1/evidence/{key}``: the same, with the key's redacted evidence document
  (``history.evidence``) instead of the rows.
- ``GET /v1/decisions/{decision id}?tenant=T``: the tenant's operator decision recorded
  under that id, on any of its keys (``decision`` null for none), once the view has applied
  every partition of the attempts topic up to its end as of the request (``caught_up``).
- ``GET /healthz``: each partition's position; 503 once the view has failed.
- ``GET /metrics``: Prometheus, to a peer on this host, or to anyone once metrics are
  opened (``--metrics-host``).

Every route but ``/healthz`` and ``/metrics`` needs ``Authorization: Bearer <API key>``,
one of the gateway's tenant keys: 401 without a known key, 403 for a key or decision of
another tenant (refused before anything is read). A decision's ``tenant`` defaults to the
key's. A view started with ``--no-auth`` (loopback only) answers without a key, to a
request whose ``Host`` names this host (127.0.0.1, localhost, [::1]; 403 otherwise: a
browser page's request after DNS rebinding names the page's host).

The key is everything after ``/v1/operations/``, percent-encoded UTF-8. Errors are JSON
``{"error": ...}`` with 400 (a bad parameter), 401 (no known API key), 403 (another
tenant's), 404 (another path), 409 (another topic or partitioning), 503 (the view failed
or cannot answer now).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, Histogram, generate_latest

from ledger_stream.access import (
    Forbidden,
    Reader,
    Unauthenticated,
    is_loopback,
    names_this_host,
    reader_of,
)
from ledger_stream.domain.events import OperatorResolution, Receipt
from ledger_stream.domain.keys import InvalidKeyError, checked_key
from ledger_stream.gateway.auth import ApiKeys
from ledger_stream.history import evidence, timeline
from ledger_stream.history.detail import shown_detail
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.logs import log_fields
from ledger_stream.serde import AvroCodec, DecodeError
from ledger_stream.serde.records import to_record
from ledger_stream.settings.view import IDLE_TIMEOUT_S, MAX_CONNECTIONS
from ledger_stream.view.follower import ReceiptView, ViewFailed
from ledger_stream.view.history import HistoryView

logger = logging.getLogger(__name__)

OPERATIONS = "/v1/operations/"
TIMELINE = "/v1/timeline/"
EVIDENCE = "/v1/evidence/"
DECISIONS = "/v1/decisions/"
DEFAULT_WAIT_MS, MAX_WAIT_MS = 1_000, 30_000
DEFAULT_ROWS, MAX_ROWS = 1_000, 100_000  # timeline rows per answer: the latest ones
SERVER_NAME = "ledger-stream-view"  # the Server header: no Python or library version
REQUEST_SECONDS = Histogram("ledger_view_request_seconds", "view lookups, answered",
                            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 1))


class BadRequest(ValueError):
    """A parameter the view cannot use (400)."""


class Mismatch(ValueError):
    """The caller's offset is of another topic or partitioning (409)."""


class Unreadable(Exception):
    """The view holds bytes it cannot decode for the key (500): a schema it does not know."""


def operation(view: ReceiptView, codec: AvroCodec, key: str, query: dict[str, list[str]],
              ) -> dict[str, Any]:
    """The answer to ``GET /v1/operations/{key}``."""
    if not key:
        raise BadRequest("the operation key is empty")
    partition = partition_for(key.encode("utf-8"), view.partitions)
    _check_same_log(view, partition, query)
    caught_up: bool | None = None  # not asked
    if "after" in query:
        after = _int_param(query, "after", 0, 2**63)
        wait_ms = _int_param(query, "wait_ms", 0, MAX_WAIT_MS, DEFAULT_WAIT_MS)
        caught_up = view.wait_for(partition, after, wait_ms / 1000)
    receipt = _record(codec, view.latest(key.encode("utf-8")), Receipt,
                      "the key's latest receipt")
    if receipt is not None:  # an old record's detail may quote a target: its length only
        receipt["detail"] = shown_detail(receipt.get("detail") or "")
    return {"key": key, "partition": partition, "position": view.position(partition),
            "caught_up": caught_up, "receipt": receipt}


class NoTimeline(Exception):
    """This view keeps no timeline (404)."""


def history(view: HistoryView | None, codec: AvroCodec, key: str,
            query: dict[str, list[str]], what: str) -> dict[str, Any]:
    """The answer to ``GET /v1/timeline/{key}`` (``what`` "timeline") or
    ``GET /v1/evidence/{key}`` ("evidence")."""
    if view is None:
        raise NoTimeline("this view keeps no timeline (started with --no-timeline)")
    try:
        checked_key(key)
    except InvalidKeyError as exc:
        raise BadRequest(f"{key!r}: {exc}") from None
    caught_up: bool | None = None
    if _int_param(query, "fresh", 0, 1, 1):
        wait_ms = _int_param(query, "wait_ms", 0, MAX_WAIT_MS, DEFAULT_WAIT_MS)
        caught_up = view.fresh(key, wait_ms / 1000)
    positions = view.partitions_of(key)  # before the read: the rows hold at least these
    records = view.records(key, codec)
    body: dict[str, Any] = {"key": key, "caught_up": caught_up, "records": len(records),
                            "positions": {f"{t}/{p}": o for (t, p), o in positions.items()}}
    if what == "timeline":
        limit = _int_param(query, "limit", 1, MAX_ROWS, DEFAULT_ROWS)
        rows = timeline(records)
        body["rows"] = [row.as_dict() for row in rows[-limit:]]  # the latest ones
        body["truncated"] = max(0, len(rows) - limit)
    else:
        body["evidence"] = evidence(key, records, int(time.time() * 1000))
    return body


def decision(view: HistoryView | None, codec: AvroCodec, decision_id: str,
             query: dict[str, list[str]]) -> dict[str, Any]:
    """The answer to ``GET /v1/decisions/{id}``."""
    if view is None:
        raise NoTimeline("this view keeps no timeline (started with --no-timeline)")
    if not decision_id:
        raise BadRequest("the decision id is empty")
    tenant = query.get("tenant", [""])[-1]
    if not tenant:
        raise BadRequest("tenant is required: decision ids are a tenant's")
    wait_ms = _int_param(query, "wait_ms", 0, MAX_WAIT_MS, DEFAULT_WAIT_MS)
    caught_up, raw = view.decision(tenant, decision_id, wait_ms / 1000)
    return {"decision_id": decision_id, "caught_up": caught_up,
            "decision": _record(codec, raw, OperatorResolution, "the decision")}


def _record(codec: AvroCodec, raw: bytes | None, kind: type, what: str,
            ) -> dict[str, Any] | None:
    """The stored event as a JSON-able record; Unreadable when it does not decode."""
    if raw is None:
        return None
    try:
        return to_record(codec.decode(raw, expect=(kind,)))
    except DecodeError as exc:
        raise Unreadable(f"{what} cannot be decoded: {exc}") from exc


def _check_same_log(view: ReceiptView, partition: int, query: dict[str, list[str]]) -> None:
    """The caller's ``after`` is an offset of its topic and partition: refuse (409) when
    they are not this view's, rather than compare it with an unrelated position."""
    topic = query.get("topic", [""])[-1]
    if topic and topic != view.topic:
        raise Mismatch(f"this view reads {view.topic}, not {topic}")
    if "partitions" in query:
        theirs = _int_param(query, "partitions", 1, 1 << 20)
        if theirs != view.partitions:
            raise Mismatch(f"{view.topic} has {view.partitions} partitions here, the caller "
                           f"counts {theirs}")
    if "partition" in query:
        asked = _int_param(query, "partition", 0, 1 << 20)
        if asked != partition:
            raise Mismatch(f"the key is in partition {partition} here, the caller says {asked}")


def _int_param(query: dict[str, list[str]], name: str, low: int, high: int,
               default: int | None = None) -> int:
    values = query.get(name)
    if not values:
        if default is None:
            raise BadRequest(f"{name} is required")
        return default
    try:
        value = int(values[-1])
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {values[-1]!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}, got {value}")
    return value


@dataclass(frozen=True)
class Route:
    """A path the view answers: ``path`` exactly, or (ending in "/") followed by a key or
    id. A public route holds no tenant's data and answers without an API key."""

    path: str
    public: bool = False


ROUTES = (Route(OPERATIONS), Route(TIMELINE), Route(EVIDENCE), Route(DECISIONS),
          Route("/healthz", public=True), Route("/metrics", public=True))


def route_of(path: str) -> tuple[Route, str] | None:
    """The route of ``path`` and the percent-encoded rest after its prefix, or None."""
    for route in ROUTES:
        if route.path.endswith("/") and path.startswith(route.path):
            return route, path[len(route.path):]
        if path == route.path:
            return route, ""
    return None


def _unquoted(rest: str, what: str) -> str:
    try:
        return unquote(rest, errors="strict")
    except UnicodeDecodeError:
        raise BadRequest(f"the {what} is not percent-encoded UTF-8") from None


def read(view: ReceiptView, timeline_view: HistoryView | None, codec: AvroCodec,
         reader: Reader, route: Route, rest: str, query: dict[str, list[str]],
         ) -> dict[str, Any]:
    """The answer to a tenant's read; Forbidden (before anything is read) when it asks
    for another tenant's key or decision."""
    if route.path == DECISIONS:
        wanted = _unquoted(rest, "id")
        tenant = query.get("tenant", [reader.tenant or ""])[-1]
        reader.check_tenant(tenant)
        return decision(timeline_view, codec, wanted, {**query, "tenant": [tenant]})
    key = _unquoted(rest, "key")
    reader.check_key(key)
    if route.path == OPERATIONS:
        with REQUEST_SECONDS.time():
            return operation(view, codec, key, query)
    return history(timeline_view, codec, key, query,
                   "timeline" if route.path == TIMELINE else "evidence")


class BoundedServer(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` at once: a connection
    beyond them is answered 503 from the accepting thread and closed."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 max_connections: int) -> None:
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            body = json.dumps({"error": f"the view serves at most {self.max_connections} "
                               "connections at once: retry"}).encode("utf-8")
            request.setblocking(False)  # a fresh socket's buffer takes it, or it is dropped
            with contextlib.suppress(OSError):
                request.send(b"HTTP/1.1 503 Service Unavailable\r\nServer: " + SERVER_NAME.encode()
                             + b"\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)  # starts the thread
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def make_server(view: ReceiptView, codec: AvroCodec, host: str, port: int,
                timeline_view: HistoryView | None = None, *, keys: ApiKeys | None,
                metrics_open: bool = False, idle_timeout_s: float = IDLE_TIMEOUT_S,
                max_connections: int = MAX_CONNECTIONS) -> ThreadingHTTPServer:
    """The view's HTTP server. ``keys``: the API keys every route but ``/healthz`` and
    ``/metrics`` needs (each reads only its tenant's keys); None answers anyone, for a
    server on a loopback address only (``access.serving_keys`` decides). ``/metrics``
    answers a loopback peer, or anyone when ``metrics_open``. A connection silent for
    ``idle_timeout_s`` is closed; more than ``max_connections`` at once are refused."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = idle_timeout_s  # on the socket: every read and write
        server_version, sys_version = SERVER_NAME, ""
        # Headers and body leave as two writes; without TCP_NODELAY the body waits for the
        # client's delayed ACK of the headers (40 ms per request).
        disable_nagle_algorithm = True

        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            url = urlsplit(self.path)
            found = route_of(url.path)
            try:
                if found is None:
                    self._json(HTTPStatus.NOT_FOUND, {"error": f"no such path: {url.path}"})
                elif found[0].path == "/healthz":
                    view.check()
                    if timeline_view is not None:
                        timeline_view.check()
                    self._json(HTTPStatus.OK, {"topic": view.topic, "positions": {
                        str(p): o for p, o in view.positions().items()}})
                elif found[0].path == "/metrics":
                    if metrics_open or is_loopback(self.client_address[0]):
                        self._send(HTTPStatus.OK, generate_latest(), CONTENT_TYPE_LATEST)
                    else:
                        self._json(HTTPStatus.FORBIDDEN, {"error": "metrics answer this "
                                   "host only (open them with --metrics-host)"})
                else:
                    if keys is None and not names_this_host(self.headers.get("Host")):
                        raise Forbidden("a view without API keys answers requests for this "
                                        "host only (Host: 127.0.0.1 or localhost)")
                    reader = reader_of(keys, self.headers.get("Authorization"))
                    self._json(HTTPStatus.OK, read(
                        view, timeline_view, codec, reader, found[0], found[1],
                        parse_qs(url.query, keep_blank_values=True)))
            except Unauthenticated as exc:
                self._json(HTTPStatus.UNAUTHORIZED, {"error": str(exc)},
                           {"WWW-Authenticate": "Bearer"})
            except Forbidden as exc:
                self._json(HTTPStatus.FORBIDDEN, {"error": str(exc)})
            except NoTimeline as exc:
                self._json(HTTPStatus.NOT_FOUND, {"error": str(exc)})
            except Mismatch as exc:
                self._json(HTTPStatus.CONFLICT, {"error": str(exc)})
            except BadRequest as exc:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            except Unreadable as exc:
                logger.warning("undecodable receipt in the view", extra=log_fields(
                    error=str(exc)))
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})
            except ViewFailed as exc:
                self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"view failed: {exc}"})
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the caller left while we waited
            except Exception as exc:  # a schema registry outage, a store closing: say so
                logger.warning("view request failed", extra=log_fields(
                    error=f"{type(exc).__name__}: {exc}"))
                self._json(HTTPStatus.SERVICE_UNAVAILABLE,
                           {"error": f"{type(exc).__name__}: {exc}"})

        def _json(self, status: HTTPStatus, body: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(body).encode("utf-8"), "application/json", headers)

        def _send(self, status: HTTPStatus, data: bytes, content_type: str,
                  headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def version_string(self) -> str:
            return SERVER_NAME

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return  # one line per request is noise; /metrics counts them

    return BoundedServer((host, port), Handler, max_connections)


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="ledger-view-http", daemon=True)
    thread.start()
    return thread
