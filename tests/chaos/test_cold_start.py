"""The soak marks the ledger's cold start when its first intent is journaled (the checker's
cause of a ``stalled`` alert that no fault explains): at the first agent's first intent, not
once the slowest agent began."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ledger_lab.chaos.options import ChaosOptions
from ledger_lab.chaos.soak import _wait_first_intents
from ledger_lab.chaos.world import World


def test_the_cold_start_is_the_first_intent_any_agent_journaled(tmp_path: Path) -> None:
    world = World(ChaosOptions(), tmp_path, lambda line: None)
    early, late = tmp_path / "agent-1-1.jsonl", tmp_path / "agent-2-1.jsonl"
    world.journals = [early, late]
    early.write_text('{"t": "sent"}\n')
    first_ms = int(time.time() * 1000)
    slow = threading.Timer(1.5, lambda: late.write_text('{"t": "sent"}\n'))
    slow.start()
    try:
        marked = _wait_first_intents(world, timeout_s=10)
    finally:
        slow.join()
    assert late.exists(), "returned before every agent journaled its first intent"
    assert first_ms - 50 <= marked <= first_ms + 500, marked - first_ms
