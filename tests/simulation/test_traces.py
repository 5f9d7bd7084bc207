"""Every protocol trace replayed on the real code (docs/design.md, 'Proof layers').

The traces are counterexamples the model checker found in simpler versions of the protocol;
replayed here, each drives the simulated world (the real ``decide`` and ``ConnectorCore``)
through the same schedule and faults, and every invariant must hold at the end.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ledger_lab.simulation.invariants import violations
from ledger_lab.simulation.traces import replay_file

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "protocol_traces"


def trace_files() -> list[Path]:
    return sorted(HERE.glob("*.txt"))


def test_the_trace_folder_exists_and_holds_traces():
    assert HERE.is_dir(), f"{HERE} is missing: the protocol traces are part of the tests"
    assert len(list(HERE.glob("*.txt"))) >= 6


@pytest.mark.parametrize("path", trace_files(), ids=lambda p: p.name)
def test_trace_replays_without_a_violation(path: Path):
    logging.disable(logging.WARNING)
    try:
        replay = replay_file(path)
    finally:
        logging.disable(logging.NOTSET)
    world = replay.world
    assert replay.followed, "the replay followed none of the trace's steps"
    problems = violations(world)
    assert not problems, (f"{path.name}: {problems}\nfollowed:\n  " + "\n  ".join(
        replay.followed) + "\nskipped:\n  " + "\n  ".join(replay.skipped))
    state = world.processor.state(world.keys[0])
    assert state.phase.terminal, f"{path.name}: the key ended {state.phase.value}"
