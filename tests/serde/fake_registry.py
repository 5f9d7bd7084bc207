"""A real HTTP server speaking the two Schema Registry endpoints the client calls.

``POST /subjects/{subject}/versions`` and ``GET /schemas/ids/{id}``, on 127.0.0.1 and a free
port, in a thread. It answers the way Confluent's registry does (global ids, ``error_code``
bodies) and can be told to fail: ``fail_with(status, error_code)`` answers every request
with that error, ``delay_s`` holds every answer back, ``stop()`` closes the port (connection
refused), ``cut_short`` cuts every answer off and ``start()`` opens the same port again.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeRegistry:
    def __init__(self) -> None:
        self.schemas: dict[int, dict[str, Any]] = {}  # id -> answer of GET /schemas/ids/{id}
        self.requests: list[tuple[str, str]] = []
        self.credentials: list[str | None] = []  # "user:password" of each request, if any
        self.failure: tuple[int, bytes] | None = None
        self.delay_s = 0.0
        self.cut_short = False  # announce more bytes than are sent, then close
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._released = threading.Event()  # wakes delayed handlers when the server stops
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeRegistry:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        server.daemon_threads = True
        server.block_on_close = False
        self.port = server.server_port
        self._server = server
        self._released.clear()
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._released.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def put(self, schema: Any, schema_type: str | None = None) -> int:
        """Stores ``schema`` (a dict, or the raw text) under the next id, as if registered."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        answer: dict[str, Any] = {"schema": text}
        if schema_type is not None:
            answer["schemaType"] = schema_type
        with self._lock:
            schema_id = max(self.schemas, default=0) + 1
            self.schemas[schema_id] = answer
        return schema_id

    def fail_with(self, status: int, error_code: int | None = None, body: bytes | None = None,
                  ) -> None:
        if body is None:
            body = b"" if error_code is None else json.dumps(
                {"error_code": error_code, "message": f"fake failure {error_code}"}).encode()
        self.failure = (status, body)

    def heal(self) -> None:
        self.failure = None
        self.delay_s = 0.0
        self.cut_short = False

    def gets(self) -> int:
        return sum(1 for method, _ in self.requests if method == "GET")

    # The request handler calls these.

    def _register(self, text: str) -> int:
        with self._lock:
            for schema_id, answer in self.schemas.items():
                if answer["schema"] == text:
                    return schema_id
        return self.put(text)


def _handler_for(registry: FakeRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self._failed("POST"):
                return
            parts = self.path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
                self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
                return
            self._send(200, {"id": registry._register(json.loads(body)["schema"])})

        def do_GET(self) -> None:  # noqa: N802
            if self._failed("GET"):
                return
            prefix = "/schemas/ids/"
            if not self.path.startswith(prefix):
                self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
                return
            schema_id = int(self.path[len(prefix):])
            answer = registry.schemas.get(schema_id)
            if answer is None:
                self._send(404, {"error_code": 40403, "message": f"Schema {schema_id} not found"})
                return
            self._send(200, answer)

        def _failed(self, method: str) -> bool:
            registry.requests.append((method, self.path))
            registry.credentials.append(_basic_credentials(self.headers.get("Authorization")))
            if registry.delay_s and registry._released.wait(registry.delay_s):
                return True  # the server is stopping: drop the connection
            if registry.failure is None:
                return False
            status, body = registry.failure
            self._send_bytes(status, body)
            return True

        def _send(self, status: int, payload: Any) -> None:
            self._send_bytes(status, json.dumps(payload).encode())

        def _send_bytes(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data) + 100 * registry.cut_short))
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = registry.cut_short

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _basic_credentials(header: str | None) -> str | None:
    if not header or not header.startswith("Basic "):
        return None
    return base64.b64decode(header[len("Basic "):]).decode()
