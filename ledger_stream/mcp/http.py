"""The MCP server over streamable HTTP, behind the gateway's tenant API keys.

The server acts for one tenant (``--tenant``): a request needs ``Authorization: Bearer
<API key>`` of that tenant (an agent's key, ``TENANT:agent=KEY``, is enough: these are an
agent's tools). 401 without a known key, 403 for another tenant's, before the MCP session
sees the request. Started with ``--no-auth`` (keys None) it answers anyone, on a loopback
address only (``access.serving_keys``), and only requests whose ``Host`` names this host
(``access.names_this_host``: a browser page's request after DNS rebinding names the page's
host).

Over stdio there is no key: the host starts the server as its own child process and is the
only one that can write to its stdin, so whoever can talk to it already runs as the user
whose configuration (tenant, effects, Kafka credentials) it holds.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from ledger_stream.access import Forbidden, Unauthenticated, names_this_host, reader_of
from ledger_stream.gateway.auth import ApiKeys


class TenantKeyGate:
    """ASGI middleware: every HTTP request carries a key of ``tenant`` (or none is asked
    for, ``keys`` None)."""

    def __init__(self, app: ASGIApp, keys: ApiKeys | None, tenant: str) -> None:
        self.app, self.keys, self.tenant = app, keys, tenant

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # the session manager's start and stop
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket: never accepted, so the server refuses it
            return
        headers = dict(scope.get("headers") or ())
        if self.keys is None and not names_this_host(
                headers.get(b"host", b"").decode("latin-1")):
            # The SDK's own check covers 127.0.0.1, localhost and ::1 only; any loopback
            # --host is accepted without keys.
            await _refuse(send, 403, "an MCP server without API keys answers requests for "
                          "this host only (Host: 127.0.0.1 or localhost)")
            return
        try:
            reader_of(self.keys, headers.get(b"authorization", b"").decode("latin-1")) \
                .check_tenant(self.tenant)
        except Unauthenticated as exc:
            await _refuse(send, 401, str(exc), [(b"www-authenticate", b"Bearer")])
            return
        except Forbidden:
            await _refuse(send, 403, f"this API key is not tenant {self.tenant}'s, whose "
                          "operations this server applies and reads")
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, error: str,
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": error}).encode("utf-8")
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
