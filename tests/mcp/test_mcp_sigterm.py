"""``ledger-stream mcp`` over stdio stops at once on SIGTERM or Ctrl-C while its host keeps
stdin open. Since the command line turns SIGTERM into SystemExit (so commands stop what they
started), the stdio server waited for the next line or EOF: its stdin reader is a thread
blocked in a read (hostile reviews, 2026-12-05; Ctrl-C had always waited so). No Kafka: the
ledger client is a stub."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

CHILD = """
import sys
import ledger_stream.sdk.client as client

class Stub:
    def __init__(self, *args, **kwargs): pass
    def __enter__(self): return self
    def __exit__(self, *exc): return None

client.LedgerClient = Stub
from ledger_stream.cli.main import main
sys.exit(main(["mcp", "--tenant", "acme", "--effects", "refund=refund@payments[invoice]"]))
"""
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_stdio_server_with_stdin_still_open(signum: int) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert child.stdin is not None and child.stdout is not None
        # Once it answers, the server reads stdin (and its handlers are in place).
        child.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        child.stdin.flush()
        answer = json.loads(child.stdout.readline())
        assert answer["id"] == 1 and "result" in answer, answer
        child.send_signal(signum)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 10 s after the signal, stdin open") from None
        assert child.returncode == -signum
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
