"""A phase's graceful stop, on real processes: a clean exit is recorded as 0; an exit with
another status on SIGTERM is a crash (a violation of the soak); a member already down from an
earlier fault is not stopped and not blamed. Each stop is noted for the checker's causes."""

from __future__ import annotations

import subprocess
import time
from types import SimpleNamespace
from typing import Any

from ledger_lab.chaos.phases import stop_gracefully
from ledger_lab.chaos.world import Member


def member(name: str, script: str) -> tuple[Member, subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["/bin/sh", "-c", script])
    return Member(name, "processor", lambda: None, proc.kill,
                  lambda: proc.pid if proc.poll() is None else None,
                  lambda: proc.poll() is None, exit_code=proc.poll), proc


def test_a_graceful_stop_records_each_exit_and_blames_only_a_bad_one() -> None:
    world: Any = SimpleNamespace(crashes=[], operated=[])
    clean, _ = member("processor-1", "trap 'exit 0' TERM; while true; do sleep 0.1; done")
    bad, _ = member("processor-2", "trap 'exit 3' TERM; while true; do sleep 0.1; done")
    down, killed = member("processor-3", "sleep 30")  # SIGKILLed by an earlier fault
    down.crash()
    assert killed.wait(5) == -9
    time.sleep(0.3)  # the traps are in place
    codes = stop_gracefully(world, [clean, bad, down])
    assert codes == {"processor-1": 0, "processor-2": 3, "processor-3": None}
    assert world.crashes == ["processor-2 exited with status 3 on SIGTERM"]
    assert sorted(f.victim for f in world.operated) == ["processor-1", "processor-2"]
    assert {f.kind for f in world.operated} == {"processor-stop"}
    assert all(m.held_until == float("inf") for m in (clean, bad, down))
