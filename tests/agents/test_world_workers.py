"""An AgentWorld's worker processes are stopped by PID when the world goes, even when the
call that started one runs on a thread of its own (falsify's ``Background``): such threads
die with the interpreter, and before, their workers were left running (a hostile review,
2026-12-05). No Kafka: the stack is a stub, the worker a module that sleeps."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ledger_lab.falsify.run import Background
from ledger_lab.harness.agents import AgentWorld
from ledger_lab.harness.processes import alive

SLEEPER = """
import os, pathlib, sys, time
pathlib.Path(sys.argv[sys.argv.index("--db") + 1]).write_text(str(os.getpid()))
time.sleep(120)
"""


def test_a_worker_on_a_background_thread_is_killed_when_the_world_stops(tmp_path: Path) -> None:
    package = tmp_path / "examples" / "refund_agent"
    package.mkdir(parents=True)
    for folder in (tmp_path / "examples", package):
        (folder / "__init__.py").write_text("")
    (package / "worker.py").write_text(SLEEPER)
    stack = SimpleNamespace(settings=SimpleNamespace(topic_prefix="t"), bootstrap="127.0.0.1:1",
                            tmp=tmp_path)
    pid_file = tmp_path / "worker.pid"
    world = AgentWorld(stack, None, str(pid_file), root=tmp_path)  # type: ignore[arg-type]

    running = Background(world.worker, "thread-1", "refund", timeout_s=100)
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    assert alive(pid)

    world.stop_running()

    assert not alive(pid)
    assert running.result(10).returncode != 0  # killed, reported as the worker's end


def test_no_worker_starts_once_the_world_stops(tmp_path: Path) -> None:
    stack = SimpleNamespace(settings=SimpleNamespace(topic_prefix="t"), bootstrap="127.0.0.1:1",
                            tmp=tmp_path)
    world = AgentWorld(stack, None, str(tmp_path / "db"), root=tmp_path)  # type: ignore[arg-type]
    world.stop_running()
    late = Background(world.worker, "thread-1", "refund", timeout_s=100)
    with pytest.raises(RuntimeError, match="no new worker"):
        late.result(10)
