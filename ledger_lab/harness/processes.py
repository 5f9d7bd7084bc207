"""Real processes for integration tests: started with the CLI, stopped or killed by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from ledger_stream.config import Settings


def stop_process(popen: subprocess.Popen[Any], timeout_s: float) -> int:
    """Stop a child by its PID: SIGTERM, then SIGKILL after ``timeout_s``; its exit status."""
    if popen.poll() is None:
        os.kill(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(popen.pid, signal.SIGKILL)
    return popen.wait(10)


class Proc:
    """A ``ledger-stream`` subcommand (or another ``module``) in its own process, logging to
    a file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None,
                 module: str = "ledger_stream.cli.main", cgroup: Path | None = None) -> None:
        """``cgroup``: a cgroup folder the process joins before it execs Python (a shell
        writes its own PID into ``cgroup.procs``, then execs), so all it allocates counts."""
        self.log = log
        self._log_fh = log.open("ab")
        command = [sys.executable, "-m", module, *args]
        if cgroup is not None:
            command = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"',
                       str(cgroup / "cgroup.procs"), *command]
        self.popen = subprocess.Popen(
            command,
            stdout=self._log_fh, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL: no chance to commit, flush or close."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(10)
        self._log_fh.close()

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout_s``. Returns the exit status."""
        code = stop_process(self.popen, timeout_s)
        self._log_fh.close()
        return code

    def wait_healthy(self, url: str, timeout_s: float = 30.0, every_s: float = 0.2) -> None:
        """Until ``url`` + ``/healthz`` answers; AssertionError, with the log's tail, when the
        process ends or ``timeout_s`` passes first."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2).close()
                return
            except OSError:
                assert self.alive() and time.monotonic() < deadline, self.tail()
                time.sleep(every_s)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not), from /proc."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def processor_group(settings: Settings) -> str:
    """The consumer group of the processors the tests start on ``settings``' topics."""
    return f"{settings.topic_prefix}-processor"


def start_processor(settings: Settings, state_dir: Path, log: Path, *extra: str,
                    metrics_port: int | str = "off", env: dict[str, str] | None = None,
                    cgroup: Path | None = None) -> Proc:
    assert settings.kafka_bootstrap
    return Proc(
        ["processor", "--bootstrap", settings.kafka_bootstrap,
         "--topic-prefix", settings.topic_prefix, "--state-dir", str(state_dir),
         "--group", processor_group(settings), "--metrics-port", str(metrics_port),
         *extra],
        log,
        env={"LEDGER_SESSION_TIMEOUT_MS": "6000", "LEDGER_CLOCK_SKEW_MS": "500", **(env or {})},
        cgroup=cgroup,
    )
