"""Child processes of the benchmark: started by it, measured through /proc, stopped by PID.

Peak RSS is the kernel's high-water mark (``VmHWM`` in ``/proc/<pid>/status``), read just
before the process is stopped, so each arm reports the peak of its own process only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from ledger_lab.bench.exceptions import BenchError
from ledger_stream.operate.approvals import new_signer, public_key_text


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size of ``pid`` in MiB (0.0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (0.0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


class CpuWindow:
    """CPU used by one process, and the machine's busy share, between two samples."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._start: tuple[float, int, int] | None = None
        self._end: tuple[float, int, int] | None = None

    def sample(self) -> None:
        point = (cpu_seconds(self.pid), *machine_ticks())
        if self._start is None:
            self._start = point
        else:
            self._end = point

    def figures(self, records: float) -> dict[str, float]:
        """``cpu_us_per_record`` of the process and ``machine_busy`` (0..1 of all cores)."""
        if self._start is None or self._end is None or records <= 0:
            return {}
        cpu = self._end[0] - self._start[0]
        ticks = self._end[2] - self._start[2]
        busy = {"machine_busy": (self._end[1] - self._start[1]) / ticks if ticks else 0.0}
        if cpu <= 0:  # a run shorter than the kernel's CPU accounting tick: not measured
            return busy
        return {"cpu_us_per_record": cpu / records * 1e6, **busy}


class Child:
    """A ``ledger-stream`` subcommand (or any module) in its own process, logging to a file."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None,
                 module: str = "ledger_stream.cli.main") -> None:
        self.log = log
        self._fh = log.open("ab")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, *argv], stdout=self._fh, stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def require_alive(self, what: str) -> None:
        if not self.alive():
            raise BenchError(f"{what} exited with {self.popen.returncode}:\n{self.tail()}")

    def stop(self, timeout_s: float = 30.0) -> float:
        """SIGTERM (SIGKILL after ``timeout_s``); returns the peak RSS in MiB."""
        peak = peak_rss_mb(self.pid)
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self.popen.wait(10)
        self._fh.close()
        return peak

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def processor(bootstrap: str, prefix: str, group: str, state_dir: Path, log: Path,
              guarantee: str, partitions: int, env: dict[str, str] | None = None) -> Child:
    """The real processor (``ledger-stream processor``) with its own group and state. The
    workload asks for no approval, so a throwaway approver key of the run's own does."""
    return Child(
        ["processor", "--bootstrap", bootstrap, "--topic-prefix", prefix, "--group", group,
         "--state-dir", str(state_dir), "--guarantee", guarantee, "--metrics-port", "off"],
        log, env={"LEDGER_PARTITIONS": str(partitions), "LEDGER_LOG_LEVEL": "WARNING",
                  **throwaway_approver_env(), **(env or {})},
    )


def throwaway_approver_env() -> dict[str, str]:
    """A processor setting that trusts a new approver key whose private half is dropped at
    once: a benchmark asks for no approval, and nothing can approve anything."""
    return {"LEDGER_APPROVAL_PUBLIC_KEYS": public_key_text(new_signer("bench"))}
