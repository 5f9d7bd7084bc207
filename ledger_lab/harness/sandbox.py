"""The payments sandbox as a real process for tests: started, killed and restarted by PID.

``SandboxProc(db)`` starts ``python -m ledger_lab.sandbox --port 0 --db DB`` and learns
its URL from the one line it prints once it accepts connections. ``restart()`` starts it
again on the same database and, so that clients configured with the URL keep working, the
same port. Every wait is bounded; a sandbox that does not come up raises with its output.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from ledger_lab.harness.processes import stop_process

LISTENING = re.compile(r"^sandbox listening on (http://\S+)$")
MODULE_COMMAND = ("-m", "ledger_lab.sandbox")
CLI_COMMAND = ("-m", "ledger_stream.cli.main", "sandbox")


class SandboxStartError(RuntimeError):
    """The sandbox exited or stayed silent before listening; the message ends with its output."""


class Response:
    """One HTTP answer: status, headers (case-insensitive lookup) and the JSON body."""

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: Any) -> None:
        self.status, self.headers, self.body = status, headers, body

    def __repr__(self) -> str:
        return f"Response({self.status}, {self.body!r})"


class SandboxProc:
    """One sandbox process on ``db``. Stop it with ``stop()`` or ``kill()``; never by name."""

    def __init__(self, db: Path, *, port: int = 0, faults: Sequence[str] = (),
                 command: Sequence[str] = MODULE_COMMAND, start_timeout_s: float = 20.0,
                 latency_ms: int = 0) -> None:
        self.db, self.faults, self.command = Path(db), tuple(faults), tuple(command)
        self.latency_ms = latency_ms
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self._output: deque[str] = deque(maxlen=2000)
        self._popen: subprocess.Popen[str] | None = None
        self._start(port)

    # -- process -----------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        assert self._popen is not None
        return self._popen.pid

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port

    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def exit_code(self) -> int | None:
        """The exit status of the current process once it ended (None while it runs)."""
        return self._popen.poll() if self._popen is not None else None

    def output(self) -> str:
        """Everything the process printed (stdout and stderr), oldest first."""
        return "\n".join(self._output)

    def kill(self) -> int:
        """SIGKILL: no chance to commit, flush or close. Returns the exit status."""
        assert self._popen is not None
        if self._popen.poll() is None:
            os.kill(self._popen.pid, signal.SIGKILL)
        return self._popen.wait(10)

    def stop(self, timeout_s: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout_s``. Returns the exit status (0: clean)."""
        assert self._popen is not None
        return stop_process(self._popen, timeout_s)

    def wait_exit(self, timeout_s: float) -> int:
        """The exit status once the process has exited; raises TimeoutError if it has not."""
        assert self._popen is not None
        try:
            return self._popen.wait(timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"sandbox pid {self.pid} still running after {timeout_s}s") \
                from exc

    def restart(self, timeout_s: float | None = None) -> None:
        """Start again on the same database and port (stopping the process first if alive).

        The port was free a moment ago, so binding is retried briefly in case the system
        has not released it yet.
        """
        if self.alive():
            self.stop()
        self._start(self.port, timeout_s)

    def __enter__(self) -> SandboxProc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self, port: int, timeout_s: float | None = None) -> None:
        deadline = time.monotonic() + (timeout_s or self.start_timeout_s)
        while True:
            failure = self._try_start(port, deadline)
            if failure is None:
                return
            if port == 0 or "cannot listen" not in failure or time.monotonic() >= deadline:
                raise SandboxStartError(f"{failure}\n--- sandbox output ---\n{self.output()}")
            time.sleep(0.1)  # the port is still held: try again, within the deadline

    def _try_start(self, port: int, deadline: float) -> str | None:
        """None once listening; else why not (the process has been stopped)."""
        args = [sys.executable, *self.command, "--port", str(port), "--db", str(self.db),
                "--latency-ms", str(self.latency_ms)]
        for fault in self.faults:
            args += ["--fault", fault]
        self._popen = popen = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        listening = threading.Event()
        threading.Thread(target=self._pump, args=(popen, listening), daemon=True).start()
        while not listening.wait(0.05):
            if popen.poll() is not None and not listening.wait(0.5):
                return f"sandbox exited with status {popen.returncode} before listening"
            if time.monotonic() >= deadline:
                self.kill()
                return "sandbox did not print its listening line in time"
        return None

    def _pump(self, popen: subprocess.Popen[str], listening: threading.Event) -> None:
        # Drains the pipe for the process's whole life, so it never blocks on a full pipe.
        assert popen.stdout is not None
        for line in popen.stdout:
            line = line.rstrip("\n")
            self._output.append(line)
            match = LISTENING.match(line)
            if match and not listening.is_set():
                self.url = match.group(1)
                listening.set()

    # -- HTTP --------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None,
                headers: dict[str, str] | None = None, timeout_s: float = 5.0) -> Response:
        """One request on a fresh connection. Connection errors propagate unchanged."""
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout_s)
        try:
            data = None if body is None else (
                body if isinstance(body, bytes) else json.dumps(body).encode())
            conn.request(method, path, body=data, headers=headers or {})
            response = conn.getresponse()
            raw = response.read()
            return Response(response.status, response.headers, json.loads(raw) if raw else None)
        finally:
            conn.close()

    def post_payment(self, key: str | None, body: Any, attempt_id: str | None = None,
                     timeout_s: float = 5.0) -> Response:
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        if attempt_id is not None:
            headers["X-Attempt-Id"] = attempt_id
        return self.request("POST", "/v1/payments", body, headers, timeout_s)

    def payment_by_key(self, key: str) -> Response:
        return self.request("GET", "/v1/payments/by-key/" + quote(key, safe=""))

    def ledger(self) -> dict[str, Any]:
        """``{"effects": [...], "requests": [...]}``: the sandbox's ground truth."""
        response = self.request("GET", "/v1/ledger")
        assert response.status == 200, response
        return dict(response.body)

    def effects(self, key: str) -> list[dict[str, Any]]:
        return [e for e in self.ledger()["effects"] if e["idempotency_key"] == key]

    def wait_ledger(self, until: Callable[[dict[str, Any]], bool],
                    timeout_s: float = 10.0) -> dict[str, Any]:
        """Poll the ledger until ``until(ledger)``; raises TimeoutError with the last one."""
        deadline = time.monotonic() + timeout_s
        while True:
            ledger = self.ledger()
            if until(ledger):
                return ledger
            if time.monotonic() >= deadline:
                raise TimeoutError(f"ledger condition not met in {timeout_s}s: {ledger}")
            time.sleep(0.05)

    def set_fault(self, mode: str, times: int = 1, key: str | None = None,
                  delay_s: float | None = None,
                  message: str | None = None) -> list[dict[str, Any]]:
        """Arm a fault; returns every armed fault. Raises AssertionError if rejected."""
        spec: dict[str, Any] = {"mode": mode, "times": times}
        if message is not None:
            spec["message"] = message
        if key is not None:
            spec["key"] = key
        if delay_s is not None:
            spec["delay_s"] = delay_s
        response = self.request("POST", "/v1/faults", spec)
        assert response.status == 200, response
        return list(response.body["faults"])

    def clear_faults(self) -> None:
        response = self.request("DELETE", "/v1/faults")
        assert response.status == 200, response
