"""``ledger-stream mcp --transport http`` answers only API keys of its tenant (the gateway's
keys), on every route of its HTTP app (enumerated from the app, so a new route is checked
too), against the real broker: 401 without a known key, 403 for another tenant's, the
tenant's own key reaches the MCP session; it refuses to start without keys unless
--no-auth, and then only on loopback."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client

from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.cli.main import main as cli
from ledger_stream.config import Settings
from ledger_stream.gateway.auth import ApiKeys
from ledger_stream.mcp.effects import parse_effects
from ledger_stream.mcp.http import TenantKeyGate
from ledger_stream.mcp.server import LedgerTools, build_server
from ledger_stream.sdk.client import LedgerClient
from tests.mcp.support import EFFECTS, _http_server, keyed

pytestmark = pytest.mark.timeout(180)

ACME, GLOBEX = "acme-mcp-key-0123456789", "globex-mcp-key-0123456789"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "auth-test", "version": "1"}}}


def app_paths(settings: Settings) -> list[str]:
    """The path of every route of the HTTP app the command serves."""
    with LedgerClient(settings) as client:
        server = build_server(LedgerTools(client, "acme", parse_effects(EFFECTS)), "s")
        gate = TenantKeyGate(server.streamable_http_app(), ApiKeys.parse(f"acme={ACME}"),
                             "acme")
        return [route.path for route in gate.app.routes]  # type: ignore[attr-defined]


@pytest.fixture
def served(ledger_settings: Settings, tmp_path: Path) -> Iterator[str]:
    (port,) = pick_free_ports(1)
    keys = tmp_path / "keys"
    keys.write_text(f"acme:agent={ACME}\nglobex={GLOBEX}\n")
    proc = _http_server(ledger_settings, port, tmp_path / "mcp.log", "--keys-file", str(keys))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


def post(url: str, key: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(url, json=INITIALIZE, headers=headers, timeout=30)


def test_every_route_answers_only_its_tenants_key(ledger_settings: Settings,
                                                   served: str) -> None:
    paths = app_paths(ledger_settings)
    assert "/mcp" in paths
    for path in paths:
        for key in (None, "not-a-known-key-at-all"):
            answer = post(served + path, key)
            assert answer.status_code == 401, (path, key, answer.text)
            assert answer.headers["www-authenticate"] == "Bearer"
        answer = post(served + path, GLOBEX)
        assert answer.status_code == 403, (path, answer.text)
        assert "serverInfo" not in answer.text
        answer = post(served + path, ACME)
        assert answer.status_code == 200 and "serverInfo" in answer.text, answer.text


def test_the_tenants_key_lists_the_tools(served: str) -> None:
    async def listed(key: str) -> set[str]:
        async with Client(keyed(f"{served}/mcp", key), read_timeout_seconds=60) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert asyncio.run(listed(ACME)) == {"submit_effect", "get_operation", "list_unresolved"}


def test_http_refuses_to_start_without_keys(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LEDGER_API_KEYS", "LEDGER_API_KEYS_FILE", "LEDGER_DEV_MODE"):
        monkeypatch.delenv(name, raising=False)
    base = ["mcp", "--tenant", "acme", "--effects", EFFECTS, "--transport", "http",
            "--bootstrap", "127.0.0.1:1"]
    assert cli(base) == 2
    assert "answers only API keys" in capsys.readouterr().err
    assert cli([*base, "--no-auth", "--host", "0.0.0.0"]) == 2
    assert "listens only on a loopback address" in capsys.readouterr().err


def test_no_auth_serves_loopback_without_a_key(ledger_settings: Settings,
                                               tmp_path: Path) -> None:
    (port,) = pick_free_ports(1)
    proc: subprocess.Popen[bytes] = _http_server(ledger_settings, port, tmp_path / "mcp.log",
                                                 "--no-auth")
    try:
        answer = post(f"http://127.0.0.1:{port}/mcp", None)
        assert answer.status_code == 200 and "serverInfo" in answer.text, answer.text
    finally:
        proc.kill()
        proc.wait(10)


def test_the_gate_hands_no_websocket_to_the_app() -> None:
    """A websocket carries no request the gate checks: it never reaches the MCP app (which
    would then answer it unauthenticated, were a websocket route ever added), keyed or not;
    the server refuses its handshake."""
    reached: list[str] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        reached.append(str(scope["type"]))

    async def receive() -> dict[str, str]:
        return {"type": "websocket.connect"}

    async def send(message: object) -> None:
        reached.append(f"sent {message}")

    for keys in (ApiKeys.parse(f"acme={ACME}"), None):
        gate = TenantKeyGate(app, keys, "acme")  # type: ignore[arg-type]
        headers = [(b"authorization", f"Bearer {ACME}".encode())]
        asyncio.run(gate({"type": "websocket", "path": "/mcp", "headers": headers},
                         receive, send))  # type: ignore[arg-type]
    assert reached == []


def test_a_gate_without_keys_answers_only_requests_for_this_host() -> None:
    """Without keys (--no-auth, any loopback --host) the gate lets through only requests
    that name this host: a browser page reaching the server by DNS rebinding names its own
    (the SDK's own check covers 127.0.0.1, localhost and ::1 only)."""
    reached: list[str] = []
    sent: list[dict[str, object]] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        reached.append(str(scope["path"]))

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    gate = TenantKeyGate(app, None, "acme")  # type: ignore[arg-type]
    for host in (b"attacker.example", b"attacker.example:8078", b"127.0.0.2.nip.io:8078"):
        asyncio.run(gate({"type": "http", "path": "/mcp", "headers": [(b"host", host)]},
                         None, send))  # type: ignore[arg-type]
    assert reached == [] and [m["status"] for m in sent if "status" in m] == [403] * 3
    for host in (b"127.0.0.2:8078", b"localhost:8078", b"[::1]:8078"):
        asyncio.run(gate({"type": "http", "path": f"/mcp {host!r}",
                          "headers": [(b"host", host)]}, None, send))  # type: ignore[arg-type]
    assert len(reached) == 3
