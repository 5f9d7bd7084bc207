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
from ledger_lab.chaos.topics import in_key_order
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for


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


def _moved_key(old: int, new: int) -> bytes:
    """A key whose partition is 2 at ``old`` partitions and another at ``new``."""
    return next(k for i in range(10_000) if partition_for(k := f"acme/refund/k{i}".encode(),
                                                          old) == 2
                and partition_for(k, new) != 2)


def test_a_moved_keys_events_are_read_old_partition_first() -> None:
    """Grown 6 to 12 with receipts at offset 10 of partition 2 on: a key's receipts in
    partition 2 (before) and its new home (after), read interleaved as a consumer delivers
    them; partition 11 came with the growth too."""
    key = _moved_key(6, 12)
    home = partition_for(key, 12)
    assert home == 8  # murmur2 % 12 is 2 or 8 when % 6 is 2
    delivered = [(home, 0, key, "succeeded"), (2, 7, key, "accepted"),
                 (11, 3, b"other", "other"), (2, 9, key, "in_progress"),
                 (home, 1, key, "replayed"), (0, 4, b"first", "first")]
    cut = {p: 10 for p in range(6)}
    assert in_key_order(delivered, [6, 12], [cut]) == [
        "first", "accepted", "in_progress", "succeeded", "replayed", "other"]
    # No growth: partition and offset order, as Kafka keeps each key.
    assert in_key_order([(1, 5, b"k", "b"), (1, 2, b"k", "a")], [6], []) == ["a", "b"]


def test_an_intent_forwarded_from_the_old_partition_is_read_where_it_was_decided() -> None:
    """After the growth an agent with fresh metadata places intent X at the key's new home;
    a held agent places Y on the old partition, which the processor forwards (the same
    bytes) to the new home after X. The ledger decided X, then Y: so must the checker read
    them, without Y's undecided first copy."""
    key = _moved_key(6, 12)
    home = partition_for(key, 12)
    cut = {p: 10 for p in range(6)}
    rows = [(2, 4, key, "before"), (2, 12, key, "Y"), (home, 0, key, "X"),
            (home, 1, key, "Y")]
    assert in_key_order(rows, [6, 12], [cut], forwarded=True) == ["before", "X", "Y"]
    # Not an input topic (nothing is forwarded there): every record is read.
    assert in_key_order(rows, [6, 12], [cut]) == ["before", "Y", "X", "Y"]
    # A key that stays in partition 2 is decided there after the growth too; a Tick names
    # its own partition, whatever its key.
    stays = next(k for i in range(10_000) if partition_for(
        k := f"acme/refund/s{i}".encode(), 6) == 2 and partition_for(k, 12) == 2)
    tick = ev.Tick(2, "p", 1)
    assert in_key_order([(2, 11, stays, "after"), (2, 3, stays, "before"),
                         (2, 12, b"~tick", tick)], [6, 12], [cut], forwarded=True) == [
        "before", "after", tick]
