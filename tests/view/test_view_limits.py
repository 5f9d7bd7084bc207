"""The view's HTTP server holds no connection forever and no more than it can: a client
that sends part of a request, or idles between requests, is closed after the idle timeout;
connections beyond the cap are answered 503 and closed at once, without a thread; and the
Server header names no Python or library version. Real sockets against ``ledger-stream
view`` on the broker, its timeout and cap set short by LEDGER_VIEW_IDLE_TIMEOUT_S and
LEDGER_VIEW_MAX_CONNECTIONS; its threads counted from /proc."""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_lab.harness.processes import Proc
from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.config import Settings

pytestmark = pytest.mark.timeout(120)
PARTIAL = b"GET /v1/operations/acme/refund/x HTTP/1.1\r\n"  # no blank line: never complete


def _serve(settings: Settings, tmp_path: Path, idle_s: str, cap: str) -> Iterator[tuple[int, int]]:
    """(port, pid) of the view process."""
    assert settings.kafka_bootstrap
    (port,) = pick_free_ports(1)
    proc = Proc(["view", "--port", str(port), "--state-dir", str(tmp_path / "view"),
                 "--bootstrap", settings.kafka_bootstrap, "--topic-prefix",
                 settings.topic_prefix, "--no-timeline", "--keys",
                 "acme=acme-view-key-0123456789"], tmp_path / "view.log",
                env={"LEDGER_VIEW_IDLE_TIMEOUT_S": idle_s, "LEDGER_VIEW_MAX_CONNECTIONS": cap})
    proc.wait_healthy(f"http://127.0.0.1:{port}", every_s=0.1)
    try:
        yield port, proc.pid
    finally:
        assert proc.stop() == 0, proc.tail()


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def _connect(port: int, first: bytes = PARTIAL) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(first)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes (TimeoutError if it does not within 10 s)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_a_partial_request_is_closed_after_the_idle_timeout(ledger_topics: Settings,
                                                             tmp_path: Path) -> None:
    with contextlib.closing(_serve(ledger_topics, tmp_path, "1", "256")) as served:
        port, _ = next(served)
        started = time.monotonic()
        assert _read_all(_connect(port)) == b""  # closed by the server, nothing answered
        took = time.monotonic() - started
        assert 0.9 <= took < 5, took
        idle = _connect(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _read_all(idle)  # answered, then closed once idle for the timeout
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        head = answer.partition(b"\r\n\r\n")[0].decode()
        assert "Server: ledger-stream-view\r\n" in head + "\r\n", head  # no Python version


def test_connections_beyond_the_cap_are_refused_at_once_without_a_thread(
        ledger_topics: Settings, tmp_path: Path) -> None:
    with contextlib.closing(_serve(ledger_topics, tmp_path, "30", "4")) as served:
        port, pid = next(served)
        before = _threads(pid)
        held = [_connect(port) for _ in range(4)]
        time.sleep(0.5)
        held_threads = _threads(pid)
        assert held_threads <= before + 4
        refused = []
        for _ in range(40):
            sock = _connect(port)
            started = time.monotonic()
            refused.append((_read_all(sock), time.monotonic() - started))
            sock.close()
        assert all(a.startswith(b"HTTP/1.1 503 ") and b"at most 4" in a for a, _ in refused), \
            refused[0]
        assert max(took for _, took in refused) < 2
        assert _threads(pid) <= held_threads  # none started for a refused connection
        held.pop().close()  # a slot frees once its connection ends
        deadline = time.monotonic() + 5
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:  # a 503 while the slot is not yet free
                assert time.monotonic() < deadline
                time.sleep(0.1)
        for sock in held:
            sock.close()
