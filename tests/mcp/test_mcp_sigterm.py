"""``ledger-stream mcp`` over stdio stops at once on SIGTERM while its host keeps stdin open.
Since the command line turns SIGTERM into SystemExit (so commands stop what they started),
the stdio server waited for the next line or EOF: its stdin reader is a thread blocked in a
read (a hostile review, 2026-12-05). No Kafka: the ledger client is a stub."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

CHILD = """
import sys
import ledger_stream.sdk.client as client

class Stub:
    def __init__(self, *args, **kwargs): pass
    def __enter__(self): return self
    def __exit__(self, *exc): return None

client.LedgerClient = Stub
from ledger_stream.cli.main import main
print("started", file=sys.stderr, flush=True)
sys.exit(main(["mcp", "--tenant", "acme", "--effects", "refund=refund@payments"]))
"""


def test_sigterm_stops_the_stdio_server_with_stdin_still_open() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert child.stderr is not None
        assert child.stderr.readline().strip() == b"started"
        time.sleep(2)  # the server reads stdin by now
        assert child.poll() is None, child.stderr.read()
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 10 s after SIGTERM, stdin open") from None
        assert child.returncode == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
