"""A partition's batch overlay: reads through to the store, the partition clock, and the
timers it fires (in (due, key) order, each once), and what step d writes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_stream.domain.deadlines import due_ms
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.processor.partition import PartitionOverlay
from ledger_stream.state import MemoryPartitionStore, StoreBatch, encode_row

pytestmark = pytest.mark.timeout(30)

POLICY = Policy(stall_after_ms=100, reconcile_timeout_ms=50, clock_skew_ms=0)


def _dispatched(key: str, lease_until: int) -> KeyState:
    return KeyState(key=key, phase=Phase.DISPATCHED, attempt=1, granted_claim_id="c",
                    lease_until_ms=lease_until, intent_event_id="i", target="t")


def put(overlay: PartitionOverlay, key: str, before: KeyState, after: KeyState) -> None:
    """A state change as the step makes it: with its row, encoded."""
    overlay.put(key, before, after, encode_row(after))


def _store_with(*states: KeyState, clock: int = 0) -> MemoryPartitionStore:
    store = MemoryPartitionStore(0)
    rows = {s.key: encode_row(s) for s in states}
    timers = [(due_ms(s, POLICY), s.key) for s in states]
    store.write(StoreBatch(rows, (), timers, clock))  # type: ignore[arg-type]
    return store


def test_reads_go_through_to_the_store_until_the_batch_changes_a_key() -> None:
    a = _dispatched("a", 1_000)
    overlay = PartitionOverlay(_store_with(a), POLICY)
    assert overlay.state("a") == a
    assert overlay.state("nobody").phase is Phase.ABSENT
    changed = replace(a, phase=Phase.RECONCILING, phase_since_ms=5)
    put(overlay, "a", a, changed)
    assert overlay.state("a") == changed
    assert overlay.store.get("a") == encode_row(a)  # nothing written before step d


def test_the_clock_only_moves_forward() -> None:
    overlay = PartitionOverlay(_store_with(clock=500), POLICY)
    overlay.advance(400)
    assert (overlay.clock, overlay.clock_moved) == (500, False)
    overlay.advance(700)
    assert (overlay.clock, overlay.clock_moved) == (700, True)


def test_due_timers_come_in_due_then_key_order_and_fire_once() -> None:
    store = _store_with(_dispatched("b", 1_000), _dispatched("a", 1_000),
                        _dispatched("c", 5_000))
    overlay = PartitionOverlay(store, POLICY)
    overlay.advance(1_099)
    assert overlay.due_now() == []
    overlay.advance(1_100)
    assert overlay.due_now() == [(1_100, "a"), (1_100, "b")]
    assert overlay.due_now() == []  # fired already in this batch
    overlay.advance(10_000)
    assert overlay.due_now() == [(5_100, "c")]


def test_a_changed_key_fires_at_its_new_deadline_not_its_stored_one() -> None:
    a = _dispatched("a", 1_000)
    overlay = PartitionOverlay(_store_with(a), POLICY)
    later = replace(a, lease_until_ms=3_000)
    put(overlay, "a", a, later)
    overlay.advance(2_000)
    assert overlay.due_now() == []  # the stored deadline (1,100) is stale
    overlay.advance(3_100)
    assert overlay.due_now() == [(3_100, "a")]


def test_the_store_batch_moves_timer_entries_with_the_rows() -> None:
    a = _dispatched("a", 1_000)
    overlay = PartitionOverlay(_store_with(a), POLICY)
    overlay.advance(1_100)
    assert overlay.due_now() == [(1_100, "a")]
    reconciling = replace(a, phase=Phase.RECONCILING, phase_since_ms=1_100)
    put(overlay, "a", a, reconciling)
    batch = overlay.store_batch(changelog_offset=42)
    assert batch.rows == {"a": encode_row(reconciling)}
    assert set(batch.timers_removed) == {(1_100, "a")}
    assert set(batch.timers_added) == {(1_150, "a")}
    assert (batch.clock_ms, batch.changelog_offset) == (1_100, 42)


def test_a_timer_that_changes_nothing_is_dropped_not_refired() -> None:
    a = _dispatched("a", 1_000)
    store = _store_with(a)
    store.write(StoreBatch(timers_added=[(900, "a")]))  # left by another policy
    overlay = PartitionOverlay(store, POLICY)
    overlay.advance(950)
    assert overlay.due_now() == [(900, "a")]
    batch = overlay.store_batch(None)
    assert (900, "a") in set(batch.timers_removed)
    assert set(batch.timers_added) == {(1_100, "a")}


def test_each_state_put_has_its_deadline_computed_once(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """The timers, the heap and the store's index read one computation per state put (and
    one of the stored state, per key): never again while firing or writing."""
    from ledger_stream.processor import partition as partition_module

    calls: list[str] = []

    def counted(state: KeyState, policy: Policy) -> int | None:
        calls.append(state.key)
        return due_ms(state, policy)

    monkeypatch.setattr(partition_module, "due_ms", counted)
    keys = [f"k{i}" for i in range(5)]
    overlay = PartitionOverlay(_store_with(*(_dispatched(k, 1_000) for k in keys)), POLICY)
    for key in keys:
        before = overlay.state(key)
        put(overlay, key, before, replace(before, lease_until_ms=2_000))
    put(overlay, "k0", overlay.state("k0"), replace(overlay.state("k0"), lease_until_ms=50))
    assert len(calls) == 2 * len(keys) + 1
    overlay.advance(200)
    assert overlay.due_now() == [(150, "k0")]  # the lease, then the stall allowance
    batch = overlay.store_batch(None)
    assert len(calls) == 2 * len(keys) + 1
    assert (2_100, "k1") in batch.timers_added and (1_100, "k1") in batch.timers_removed


def test_the_changelog_records_of_a_batch_name_it_and_carry_each_rows_basis() -> None:
    from ledger_stream.domain import containment
    from ledger_stream.domain.deadlines import deadline_basis
    from ledger_stream.processor import changelog

    a = _dispatched("a", 1_000)
    overlay = PartitionOverlay(_store_with(a), POLICY)
    put(overlay, "a", a, replace(a, phase=Phase.RECONCILING, phase_since_ms=5))
    overlay.put_containment(containment.NONE)
    overlay.advance(70)
    batch = changelog.headers("g", changelog.Positions(4, 9))
    records = changelog.records("g", changelog.Positions(4, 9), overlay)
    rows = overlay.rows()
    assert records == [
        (b"a", rows["a"], [*batch, changelog.due_header(
            deadline_basis(overlay.changed_states()["a"]))]),
        (changelog.CONTAINMENT_KEY.encode(), rows[changelog.CONTAINMENT_KEY], batch),
        (changelog.CLOCK_KEY, b"70", batch)]


def test_a_key_read_without_a_row_has_no_stored_deadline_to_compute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh key (no row, so no entry in the timer index) costs one deadline, its new
    state's, not a second one of the empty state it replaces."""
    from ledger_stream.processor import partition

    asked: list[KeyState] = []

    def counted(state: KeyState, policy: Policy) -> int | None:
        asked.append(state)
        return due_ms(state, policy)

    monkeypatch.setattr(partition, "due_ms", counted)
    overlay = PartitionOverlay(_store_with(_dispatched("stored", 1_000)), POLICY)
    overlay.read_ahead(["fresh", "stored"])
    new = _dispatched("fresh", 2_000)
    put(overlay, "fresh", overlay.state("fresh"), new)
    assert asked == [new]
    moved = replace(overlay.state("stored"), lease_until_ms=3_000)
    put(overlay, "stored", overlay.state("stored"), moved)
    assert asked == [new, _dispatched("stored", 1_000), moved]  # its index entry goes
    written = overlay.store_batch(None)
    assert written.timers_removed == {(due_ms(_dispatched("stored", 1_000), POLICY),
                                       "stored")}
    assert written.timers_added == {(due_ms(new, POLICY), "fresh"),
                                    (due_ms(moved, POLICY), "stored")}
