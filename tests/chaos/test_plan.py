"""The soak's operator phases are placed by fraction of the soak, in time order, and options
that cannot make a schedule are refused with a clear error. An agent's stop time moves on
when the soak writes a later one (a phase held the load), and the checker reads a key's
events in the order they were decided across a growth."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ledger_lab.chaos.agent import _until
from ledger_lab.chaos.plan import PlanError, PlannedPhase, plan_phases
from ledger_lab.chaos.topics import in_key_order, layout_of


def test_both_phases_are_placed_at_their_fractions_in_time_order() -> None:
    assert plan_phases(3600, 6, 1 / 3, True, 2 / 3) == [
        PlannedPhase(1200.0, "growth"), PlannedPhase(2400.0, "upgrade")]
    # The order follows the fractions, not the kinds.
    assert plan_phases(60, 6, 0.8, True, 0.5) == [
        PlannedPhase(30.0, "upgrade"), PlannedPhase(48.0, "growth")]


def test_a_phase_not_asked_for_is_not_planned() -> None:
    assert plan_phases(600, 0, 1 / 3, False, 2 / 3) == []
    assert plan_phases(600, 0, 1 / 3, True, 2 / 3) == [PlannedPhase(400.0, "upgrade")]
    assert plan_phases(600, 12, 1 / 3, False, 2 / 3) == [PlannedPhase(200.0, "growth")]


@pytest.mark.parametrize(("args", "why"), [
    ((600, 6, 0.0, False, 0.5), "between 0 and 1"),
    ((600, 6, 1.0, False, 0.5), "between 0 and 1"),
    ((600, 0, 0.5, True, 1.5), "between 0 and 1"),
    ((12, 6, 0.25, False, 0.5), "warm-up"),
    ((600, 6, 0.5, True, 0.5), "same second"),
    ((600, -6, 0.5, False, 0.5), "only growing"),
])
def test_phases_that_cannot_be_scheduled_are_refused(args: tuple, why: str) -> None:
    with pytest.raises(PlanError, match=why):
        plan_phases(*args)


def test_an_agent_stops_at_the_later_time_the_soak_writes(tmp_path: Path) -> None:
    until_file = tmp_path / "until"
    args = argparse.Namespace(until=100.0, until_file=str(until_file))
    assert _until(args) == 100.0  # not written yet
    until_file.write_text("160.5")
    assert _until(args) == 160.5
    until_file.write_text("50")  # never earlier than asked at the start
    assert _until(args) == 100.0
    assert _until(argparse.Namespace(until=100.0, until_file="")) == 100.0


def test_a_moved_keys_events_are_read_old_partition_first() -> None:
    """Grown 6 to 12: a key's receipts in partition 2 (before) and 8 (after), read
    interleaved as a consumer delivers them; partition 11 came with the growth too."""
    assert [layout_of(p, [6, 12]) for p in (0, 5, 6, 11)] == [0, 0, 1, 1]
    delivered = [(8, 0, "succeeded"), (2, 7, "accepted"), (11, 3, "other"),
                 (2, 9, "in_progress"), (8, 1, "replayed"), (0, 4, "first")]
    assert in_key_order(delivered, [6, 12]) == [
        "first", "accepted", "in_progress", "succeeded", "replayed", "other"]
    # No growth: partition and offset order, as Kafka keeps each key.
    assert in_key_order([(1, 5, "b"), (1, 2, "a")], [6]) == ["a", "b"]
