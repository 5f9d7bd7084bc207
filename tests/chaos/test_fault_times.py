"""When the soak's causes act, as the checker is told: the ledger's cold start is marked at
the first intent any agent journaled (not once the slowest agent began); a kill lasts until
its victim's next start; a graceful stop until the start after it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ledger_lab.chaos.checker import FaultAt
from ledger_lab.chaos.options import ChaosOptions
from ledger_lab.chaos.phases import _operated
from ledger_lab.chaos.soak import _wait_first_intents, until_back
from ledger_lab.chaos.world import Member, World


def member(name: str, role: str, *started_ms: int) -> Member:
    return Member(name, role, lambda: None, lambda: None, lambda: None, lambda: False,
                  started_ms=list(started_ms))


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


def test_a_kill_lasts_until_its_victim_started_again() -> None:
    members = [member("broker-2", "broker", 1_000, 31_000, 90_000),
               member("processor-1", "processor", 1_000, 50_000)]
    faults = [FaultAt(10_000, "broker-kill", "broker-2"),
              FaultAt(60_000, "broker-kill", "broker-2"),
              FaultAt(20_000, "pause", "processor-1"),  # frozen, never down: an instant
              FaultAt(95_000, "broker-kill", "broker-2")]  # not back by the end
    assert [f.until_ms for f in until_back(faults, members)] == [31_000, 90_000, 0, 0]


def test_a_graceful_stop_lasts_until_the_start_after_it(tmp_path: Path) -> None:
    world = World(ChaosOptions(), tmp_path, lambda line: None)
    processor = member("processor-1", "processor")
    _operated(world, processor)
    time.sleep(0.05)
    _operated(world, processor, started=True)
    stop, start = world.operated
    assert stop.until_ms == start.at_ms > stop.at_ms
    time.sleep(0.05)
    _operated(world, processor)  # the next stop and start leave the first pair as it was
    _operated(world, processor, started=True)
    assert world.operated[:2] == [stop, start]
