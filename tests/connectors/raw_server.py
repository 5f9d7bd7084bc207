"""A raw HTTP server the HTTP target tests talk to (a fixtures module: it holds no tests)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator


class RawServer:
    """A TCP server that gives each connection to ``serve(conn, stop)`` in a thread."""

    def __init__(self, serve: Callable[[socket.socket, threading.Event], None]) -> None:
        self.stop = threading.Event()
        self.requests: list[bytes] = []
        self._serve = serve
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, self.stop), daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self._listener.close()


def requests_on(conn: socket.socket, stop: threading.Event) -> Iterator[dict[str, str]]:
    """The headers of each HTTP/1.1 request read from ``conn``, one after another (a kept
    connection); each body is read and dropped. Ends when the peer hangs up, the socket
    fails or ``stop`` is set."""
    buffer = b""
    while not stop.is_set():
        while b"\r\n\r\n" not in buffer:
            try:
                chunk = conn.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
        length = int(headers.get("Content-Length", "0"))
        while len(buffer) < length:
            chunk = conn.recv(4096)
            if not chunk:
                return
            buffer += chunk
        buffer = buffer[length:]
        yield headers
