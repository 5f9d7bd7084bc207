"""The gateway's own metrics and the per-request plumbing around its routes.

``GET /metrics`` serves this process's Prometheus registry (the ledger client's metrics and
``ledger_gateway_requests_total``) without an API key, as Prometheus scrapes: to a peer on
this host (a request forwarded by a proxy is not, whatever address it names), and to any
peer only once metrics are opened (``--metrics-host``). Metrics name
no operation key or tenant, only routes and statuses.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, Counter, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ledger_stream.access import bearer, may_read_metrics
from ledger_stream.config import Settings
from ledger_stream.gateway.refusals import PUBLIC, ErrorBody
from ledger_stream.sdk.view_client import forwarding

REQUESTS = Counter("ledger_gateway_requests_total",
                   "gateway requests answered, by route template and HTTP status (401: no "
                   "known API key; 403: another tenant's key)", ["route", "status"])


class RequestScope:
    """ASGI middleware: each request's view lookups send the caller's API key (the view
    reads only that key's tenant's keys, whatever the gateway checked), and its answer is
    counted by route template, never by path (a path holds an operation key)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        headers = dict(scope.get("headers") or ())
        key = bearer(headers.get(b"authorization", b"").decode("latin-1"))
        try:
            with forwarding(key):
                await self.app(scope, receive, sending)
        finally:
            route: Any = scope.get("route")
            REQUESTS.labels(getattr(route, "path", "unmatched"), str(status[0])).inc()


def add_metrics(app: FastAPI, settings: Settings) -> None:
    """``GET /metrics`` and the request middleware on ``app``."""
    app.add_middleware(RequestScope)

    @app.get("/metrics", tags=["service"], openapi_extra=PUBLIC, response_class=Response,
             responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
                              "description": "the Prometheus text format"},
                        403: {"model": ErrorBody, "description": "a peer other than this "
                              "host (or a forwarded request) while metrics are not opened "
                              "(--metrics-host)"}})
    async def metrics(request: Request) -> Response:
        # Behind a proxy uvicorn takes the client's address from X-Forwarded-For, whose
        # entries the client can write: a forwarded request is never this host's.
        forwarded = "x-forwarded-for" in request.headers or "forwarded" in request.headers
        peer = request.client.host if request.client and not forwarded else None
        if not may_read_metrics(settings, peer):
            return JSONResponse({"detail": "metrics answer this host only (open them with "
                                 "--metrics-host)"}, 403)
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
