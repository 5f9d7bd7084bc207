"""World.stop with a slow start under way (a broker, target or member restarted on a thread of
its own): the start is waited for, then stopped, never left running after the soak."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ledger_lab.chaos.options import ChaosOptions
from ledger_lab.chaos.world import Member, World
from ledger_lab.harness.processes import alive


def test_a_member_still_starting_when_the_world_stops_is_stopped_too(tmp_path: Path) -> None:
    box: dict[str, subprocess.Popen[bytes]] = {}

    def launch() -> None:  # a slow start: it runs only after stop() has begun
        time.sleep(0.5)
        box["proc"] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    def crash() -> None:
        box["proc"].kill()
        box["proc"].wait()

    member = Member("processor-1", "processor", launch, crash,
                    lambda: box["proc"].pid if "proc" in box else None,
                    lambda: "proc" in box and box["proc"].poll() is None, slow=True)
    world = World(ChaosOptions(), tmp_path, lambda line: None)
    world.members.append(member)
    member.start()
    try:
        world.stop()
        assert "proc" in box, "stop() returned before the start under way had finished"
        assert not alive(box["proc"].pid)
    finally:
        if "proc" in box and box["proc"].poll() is None:
            box["proc"].kill()
            box["proc"].wait()
