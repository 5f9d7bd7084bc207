"""SIGTERM to a command that started processes of its own stops them by PID, as Ctrl-C
does. Before, Python's default for SIGTERM ended the command at once: a benchmark stopped
that way left its local Kafka and its processor running (found 2026-12-05)."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger_lab.harness.processes import alive


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid``, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


@pytest.mark.kafka
@pytest.mark.own_cluster
@pytest.mark.timeout(240)
def test_sigterm_to_the_benchmark_stops_its_broker_and_children(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {"LEDGER_HOME": str(tmp_path / "home")}
    bench = subprocess.Popen(
        [sys.executable, "-m", "ledger_stream.cli.main", "bench", "--smoke", "--arms",
         "avro-echo,ledger", "--mode", "at-least-once", "--out", str(tmp_path / "b.json")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started: set[int] = set()
    try:
        assert bench.stderr is not None
        seen = []
        with selectors.DefaultSelector() as sel:
            sel.register(bench.stderr, selectors.EVENT_READ)
            deadline = time.monotonic() + 150
            # Wait until an arm's process runs beside the broker: two children at least.
            while time.monotonic() < deadline and bench.poll() is None:
                if sel.select(0.2):
                    seen.append(bench.stderr.readline())
                started |= _children(bench.pid)
                if len(started) >= 2 and any("starting" in line for line in seen):
                    break
        assert bench.poll() is None, "".join(seen)
        assert len(started) >= 2, f"children seen: {started}\n{''.join(seen)}"

        bench.send_signal(signal.SIGTERM)
        bench.wait(timeout=90)

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(alive(pid) for pid in started):
            time.sleep(0.2)
        assert not [pid for pid in started if alive(pid)], "left running after SIGTERM"
        assert bench.returncode == 128 + signal.SIGTERM, bench.returncode
    finally:
        for pid in started | ({bench.pid} if bench.poll() is None else set()):
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            bench.wait(timeout=10)
