"""The gateway reads no request body beyond MAX_BODY_BYTES, with or without a key: a body
declaring more is refused at once, any other (chunked, or chunked beside a small
Content-Length) once more than that came. Against the
``ledger-stream api`` process (its peak resident memory, from /proc, is the ground truth)
and against the middleware itself (what the application it guards receives). No broker:
nothing here gets past the API key check."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_lab.harness.processes import Proc
from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.gateway.body_limit import MAX_BODY_BYTES, BodyLimit

pytestmark = pytest.mark.timeout(120)
BIG = 64 * 1024 * 1024  # what a caller sends: 8 times the bound
CHUNK = 256 * 1024


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """(port, pid) of ``ledger-stream api`` whose Kafka is unreachable."""
    (port,) = pick_free_ports(1)
    proc = Proc(["api", "--port", str(port), "--bootstrap", "127.0.0.1:1",
                 "--keys", "acme:agent=acme-agent-0123456789abcdef"], tmp_path / "api.log")
    proc.wait_healthy(f"http://127.0.0.1:{port}")
    yield port, proc.pid
    assert proc.stop() == 0, proc.tail()


def _peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


# How the body is framed: the headers sent, and whether it is sent chunked.
FRAMINGS = {
    "content-length": (f"Content-Length: {BIG}\r\n", False),
    "chunked": ("Transfer-Encoding: chunked\r\n", True),
    # A small length beside chunked: the server reads it as chunked, to its end.
    "content-length-2-and-chunked": ("Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
                                     True),
}


def _post(port: int, framing: str) -> bytes:
    """POST /v1/intents without a key, a JSON body of BIG bytes framed as FRAMINGS[framing]:
    what the server answered (read while the body is still being sent; a server that stops
    reading closes)."""
    headers, chunked = FRAMINGS[framing]
    head = (f"POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\n{headers}\r\n").encode("ascii")
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    answer = bytearray()

    def read() -> None:
        with contextlib.suppress(OSError):
            while data := sock.recv(65536):
                answer.extend(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    body = b'{"key": "' + b"x" * (BIG - 11) + b'"}'
    with contextlib.suppress(OSError):  # the server closes once it answered
        sock.sendall(head)
        for at in range(0, BIG, CHUNK):
            part = body[at:at + CHUNK]
            sock.sendall(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
    reader.join(60)
    sock.close()
    return bytes(answer)


@pytest.mark.parametrize("framing", list(FRAMINGS))
def test_an_oversized_body_is_a_413_and_never_held(api: tuple[int, int], framing: str) -> None:
    port, pid = api
    before = _peak_rss_bytes(pid)
    answer = _post(port, framing)
    grown = _peak_rss_bytes(pid) - before
    # Holding the body alone would be BIG bytes (and parsing it twice that again).
    assert grown < 16 * 1024 * 1024, f"peak resident memory grew {grown} bytes"
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"connection: close" in head.lower()
    assert str(MAX_BODY_BYTES) in json.loads(body)["detail"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
        assert r.status == 200


class Recorder:
    """An ASGI application that reads the whole body and records it."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _run(limit: int, chunks: list[bytes], length: int | None) -> tuple[Recorder, int, list[Any]]:
    """(the application, how many of ``chunks`` were taken, what was sent back)."""
    app, sent, taken = Recorder(), [], [0]

    async def receive() -> dict[str, Any]:
        taken[0] += 1
        i = taken[0] - 1
        return {"type": "http.request", "body": chunks[i], "more_body": i + 1 < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [] if length is None else [(b"content-length", str(length).encode())]
    asyncio.run(BodyLimit(app, limit)({"type": "http", "headers": headers}, receive, send))
    return app, taken[0], sent


def test_a_chunked_body_is_counted_as_it_comes_and_stopped_at_the_bound() -> None:
    app, taken, sent = _run(1000, [b"x" * 100] * 1000, None)  # 100,000 bytes offered
    assert app.bodies == [] and sent[0]["status"] == 413
    assert taken == 11  # 1,100 bytes read: the first chunk past the bound, then no more


def test_a_body_past_its_declared_length_is_counted_and_stopped_at_the_bound() -> None:
    # What the server hands on for Content-Length: 2 beside Transfer-Encoding: chunked.
    app, taken, sent = _run(1000, [b"x" * 100] * 1000, 2)
    assert app.bodies == [] and sent[0]["status"] == 413
    assert taken == 11


def test_a_declared_length_over_the_bound_is_refused_before_any_is_read() -> None:
    app, taken, sent = _run(1000, [b"x" * 1001], 1001)
    assert (app.bodies, taken, sent[0]["status"]) == ([], 0, 413)


@pytest.mark.parametrize("length", [None, 1000], ids=["chunked", "content-length"])
def test_a_body_within_the_bound_reaches_the_application_whole(length: int | None) -> None:
    app, _, sent = _run(1000, [b"a" * 400, b"b" * 600], length)
    assert app.bodies == [b"a" * 400 + b"b" * 600] and sent[0]["status"] == 200
