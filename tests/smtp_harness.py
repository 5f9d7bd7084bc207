"""The test SMTP server (``tests.smtp_server``) in its own process, stopped or killed by PID."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ledger_lab.harness.processes import stop_process

_REPO = Path(__file__).resolve().parents[1]
_READY = re.compile(rb"smtp listening on ([\d.]+):(\d+)")


class SmtpServerProc:
    """Starts the server and returns once it printed its ready line (or raises RuntimeError
    with its log). ``ledger()`` is what the server accepted, one dict per mail."""

    def __init__(self, workdir: Path, delay_after_data_s: float | None = None,
                 ready_timeout_s: float = 15.0) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.ledger_path = workdir / "smtp-ledger.jsonl"
        self.log = workdir / "smtp-server.log"
        self.maildir = workdir / "maildir"  # the recipients' mailbox: every accepted mail
        args = ["--port", "0", "--ledger", str(self.ledger_path), "--maildir",
                str(self.maildir)]
        if delay_after_data_s is not None:
            args += ["--delay-after-data", str(delay_after_data_s)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)}
        self._log_fh = self.log.open("ab")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "tests.smtp_server", *args], cwd=_REPO, env=env,
            stdout=subprocess.PIPE, stderr=self._log_fh,
        )
        self.host, self.port = self._await_ready(ready_timeout_s)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def ledger(self) -> list[dict[str, Any]]:
        if not self.ledger_path.exists():
            return []
        lines = self.ledger_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def stop(self, timeout_s: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout_s``. Returns the exit status."""
        code = stop_process(self.popen, timeout_s)
        self._close()
        return code

    def kill(self) -> None:
        """SIGKILL: open connections drop without a reply."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(10)
        self._close()

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> SmtpServerProc:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _await_ready(self, timeout_s: float) -> tuple[str, int]:
        assert self.popen.stdout is not None
        deadline = time.monotonic() + timeout_s
        seen = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.popen.stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if not selector.select(left):
                    continue
                chunk = os.read(self.popen.stdout.fileno(), 4096)
                seen += chunk
                found = _READY.search(seen)
                if found:
                    return found.group(1).decode(), int(found.group(2))
                if not chunk:  # stdout closed: the server exited
                    break
        self.kill()
        raise RuntimeError(f"the test SMTP server did not get ready within {timeout_s}s "
                           f"(exit {self.popen.returncode}); output {seen!r}; log "
                           f"{self.log}:\n{self.tail()}")

    def _close(self) -> None:
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        self._log_fh.close()
