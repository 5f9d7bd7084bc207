"""The MCP server's effects and an HTTP server on the test stack, shared by the MCP tests (a
fixtures module: it holds no tests)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from ledger_stream.config import Settings

REPO = Path(__file__).resolve().parents[2]


EFFECTS = "refund=refund@payments[invoice],mail=send_email@smtp[to_hash]"


def server_args(settings: Settings, *extra: str) -> list[str]:
    assert settings.kafka_bootstrap
    return ["-m", "ledger_stream.cli.main", "mcp", "--tenant", "acme", "--effects", EFFECTS,
            "--bootstrap", settings.kafka_bootstrap, "--topic-prefix", settings.topic_prefix,
            *extra]


HTTP_KEY = "acme-mcp-http-key-0123456789"


def keyed(url: str, key: str = HTTP_KEY) -> Any:
    """A streamable HTTP transport to ``url`` that sends ``key``."""
    return streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=90))


def _http_server(settings: Settings, port: int, log: Path, *access: str,
                 ) -> subprocess.Popen[bytes]:
    """The server over HTTP; ``access`` flags, by default the key HTTP_KEY for acme."""
    proc = subprocess.Popen([sys.executable, *server_args(
        settings, "--transport", "http", "--port", str(port),
        *(access or ("--keys", f"acme={HTTP_KEY}")))], cwd=REPO,
        stdout=log.open("ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the MCP server did not listen on {port}: {log.read_text()}")
