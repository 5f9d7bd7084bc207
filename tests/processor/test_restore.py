"""Restore over a fake changelog and the memory store: committed records are applied,
records of uncommitted batches and of other groups are skipped, the clock and the timer
index come back, and the store remembers how far it read."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given

from ledger_stream.domain import decide
from ledger_stream.domain.deadlines import SEAL, allowance, deadline_basis, due_ms
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, absent
from ledger_stream.processor.changelog import (
    CLOCK_KEY,
    DUE,
    ChangelogRecord,
    Positions,
    clock_value,
    due_header,
    headers,
    parse,
    parse_due,
)
from ledger_stream.processor.restore import apply_records
from ledger_stream.state import (
    MemoryPartitionStore,
    RocksDBPartitionStore,
    StoreBatch,
    decode_row,
    encode_row,
)
from tests.factories import claim, intent
from tests.processor.restore_support import GROUP, POLICY, _states
from tests.state.samples import policies, states

pytestmark = pytest.mark.timeout(30)





def _record(offset: int, key: bytes, value: bytes, at: Positions,
            group: str = GROUP) -> ChangelogRecord:
    return parse(offset, key, value, headers(group, at))


def test_committed_batches_are_applied_and_a_crashed_one_is_skipped() -> None:
    reserved, granted = _states()
    store = MemoryPartitionStore(0)
    records = [
        _record(0, b"acme/pay/A", reserved, Positions(5, 0)),
        _record(1, CLOCK_KEY, clock_value(1_000), Positions(5, 0)),
        # The batch that granted A crashed before its commit (attempts offset 3 > 2):
        _record(2, b"acme/pay/A", granted, Positions(5, 3)),
        _record(3, CLOCK_KEY, clock_value(2_000), Positions(5, 3)),
        _record(4, b"acme/pay/B", reserved, Positions(9, 9), group="another-group"),
    ]
    stats = apply_records(store, records, Positions(5, 2), GROUP, POLICY)

    assert (stats.applied, stats.skipped) == (2, 3)
    assert store.get("acme/pay/A") == reserved
    assert store.get("acme/pay/B") is None
    assert store.clock_ms == 1_000
    # The store stays at the first record skipped: whether it is committed later is not
    # known yet (another group's record is never ours, and does not hold it).
    assert store.changelog_offset == 2
    due = due_ms(decode_row(reserved), POLICY)
    assert list(store.due_timers(2**62)) == [(due, "acme/pay/A")]


def test_a_batch_committed_after_the_offsets_were_read_is_applied_by_the_next_restore() -> None:
    """A member restoring against committed offsets that a newer owner has since moved on
    (its assignment is stale: a rebalance is on its way) skips that owner's records. Its
    next restore, with the newer offsets, must still apply them: a store that passed them
    would decide from a state the ledger has left (found by the chaos soak: a key granted
    again from a lost row, a valid claim answered Done)."""
    reserved, granted = _states()
    store = MemoryPartitionStore(0)
    records = [
        _record(0, b"acme/pay/A", reserved, Positions(5, 0)),
        _record(1, b"acme/pay/A", granted, Positions(5, 3)),  # committed after the read
        _record(2, CLOCK_KEY, clock_value(2_000), Positions(5, 3)),
        _record(3, b"acme/pay/B", reserved, Positions(9, 9), group="another-group"),
    ]
    first = apply_records(store, records, Positions(5, 2), GROUP, POLICY, end_offset=4)
    assert (first.applied, first.skipped) == (1, 3)
    assert (store.get("acme/pay/A"), store.changelog_offset) == (reserved, 1)

    later = [r for r in records if r.offset >= store.changelog_offset]
    second = apply_records(store, later, Positions(5, 3), GROUP, POLICY, end_offset=4)

    assert (second.applied, second.skipped) == (2, 1)
    assert store.get("acme/pay/A") == granted
    assert (store.clock_ms, store.changelog_offset) == (2_000, 4)
    assert list(store.due_timers(2**62)) == [(due_ms(decode_row(granted), POLICY),
                                              "acme/pay/A")]


def test_records_applied_after_a_skipped_one_are_kept_and_read_again_in_order() -> None:
    """Past a record not yet committed, committed ones are still applied (the state the
    inputs after the committed offsets are decided from), and the store stays at the
    skipped one, in every chunk written."""
    reserved, granted = _states()
    store = MemoryPartitionStore(0)
    records = [_record(0, b"acme/pay/A", granted, Positions(7, 3)),  # not committed yet
               _record(1, b"acme/pay/B", reserved, Positions(5, 0))]
    stats = apply_records(store, records, Positions(5, 2), GROUP, POLICY, end_offset=2)
    assert (stats.applied, stats.skipped) == (1, 1)
    assert store.get("acme/pay/A") is None
    assert (store.get("acme/pay/B"), store.changelog_offset) == (reserved, 0)


def test_a_later_row_replaces_the_key_and_its_timer() -> None:
    reserved, granted = _states()
    store = MemoryPartitionStore(0)
    stale = (due_ms(decode_row(reserved), POLICY), "acme/pay/A")
    store.write(StoreBatch({"acme/pay/A": reserved}, (), [stale], 1_000, 2))
    records = [_record(2, b"acme/pay/A", granted, Positions(6, 3)),
               _record(3, CLOCK_KEY, clock_value(2_000), Positions(6, 3))]

    stats = apply_records(store, records, Positions(6, 3), GROUP, POLICY, end_offset=5)

    assert stats.applied == 2
    assert store.get("acme/pay/A") == granted
    assert list(store.due_timers(2**62)) == [(due_ms(decode_row(granted), POLICY),
                                              "acme/pay/A")]
    assert (store.clock_ms, store.changelog_offset) == (2_000, 5)


def test_records_without_our_headers_are_skipped() -> None:
    store = MemoryPartitionStore(0)
    foreign = parse(0, b"acme/pay/A", b"[]", None)
    broken = parse(1, b"acme/pay/A", b"[]", [("ledger.intents.next", b"x")])
    stats = apply_records(store, [foreign, broken], Positions(10, 10), GROUP, POLICY)
    assert (stats.applied, stats.skipped) == (0, 2)
    assert store.get("acme/pay/A") is None
    assert store.changelog_offset == 2


def test_an_empty_changelog_changes_nothing() -> None:
    store = MemoryPartitionStore(0)
    stats = apply_records(store, [], Positions(), GROUP, POLICY, end_offset=0)
    assert (stats.applied, stats.skipped, store.changelog_offset) == (0, 0, 0)


def test_changelog_headers_parse_in_every_shape_the_client_gives() -> None:
    """Consumed records carry (str, bytes) pairs; str values and a mapping parse the same,
    a None value is no header, the last of a repeated header wins."""
    from ledger_stream.processor.changelog import GROUP, INTENTS, Positions

    expected = (b"g", Positions(5, 7))
    shapes = [
        headers("g", Positions(5, 7)),
        [(name, value.decode()) for name, value in headers("g", Positions(5, 7))],
        dict(headers("g", Positions(5, 7))),
        [(INTENTS, b"1"), (GROUP, None), *headers("g", Positions(5, 7)), (GROUP, None)],
    ]
    for shape in shapes:
        record = parse(3, b"k", b"[]", shape)
        assert (record.group.encode(), record.positions) == expected, shape
    assert parse(3, None, None, [(GROUP, b"g")]).positions == Positions()
    assert parse(3, b"k", b"[]", [(GROUP, b"g"), (INTENTS, "x")]).group == ""


# -- deadlines from the basis written beside each row (no row decoded) ----------------------

def _with_due(offset: int, key: bytes, row: bytes, at: Positions,
              due: bytes | None = None) -> ChangelogRecord:
    """A record as the processor writes it: its row's deadline basis in ``ledger.due``
    (``due`` overrides the header's value, e.g. with one this code does not write)."""
    header = due_header(deadline_basis(decode_row(row)))
    return parse(offset, key, row, [*headers(GROUP, at), (DUE, header[1] if due is None else due)])


def _undecodable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Restore must not decode a row: decoding one fails the test."""
    def refuse(row: bytes) -> list[object]:
        raise AssertionError("restore decoded a row")
    monkeypatch.setattr("ledger_stream.processor.restore.decode_values", refuse)


def test_the_timer_comes_from_the_basis_under_the_restoring_policy_not_the_writers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reserved, granted = _states()
    other = Policy(stall_after_ms=7_777, clock_skew_ms=11, replay_window_ms=99_000)
    _undecodable(monkeypatch)
    for row in (reserved, granted):
        store = MemoryPartitionStore(0)
        apply_records(store, [_with_due(0, b"acme/pay/A", row, Positions(1, 1))],
                      Positions(1, 1), GROUP, other)
        assert list(store.due_timers(2**62)) == [(due_ms(decode_row(row), other), "acme/pay/A")]


def test_a_row_without_a_basis_this_code_reads_is_decoded_instead() -> None:
    reserved, _ = _states()
    expected = [(due_ms(decode_row(reserved), POLICY), "acme/pay/A")]
    for due in (b"x12", b"s", b"s1e3", "s\u00e91".encode(), b""):
        store = MemoryPartitionStore(0)
        apply_records(store, [_with_due(0, b"acme/pay/A", reserved, Positions(1, 1), due)],
                      Positions(1, 1), GROUP, POLICY)
        assert list(store.due_timers(2**62)) == expected, due
    store = MemoryPartitionStore(0)  # an older processor's record: no header at all
    apply_records(store, [_record(0, b"acme/pay/A", reserved, Positions(1, 1))],
                  Positions(1, 1), GROUP, POLICY)
    assert list(store.due_timers(2**62)) == expected


def test_a_key_rewritten_in_a_later_chunk_keeps_only_its_new_timer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each record its own store write (CHUNK 1): the first row's timer entry must go when
    the second comes (its deadline decoded from the stored row)."""
    reserved, granted = _states()
    monkeypatch.setattr("ledger_stream.processor.restore.CHUNK", 1)
    store = MemoryPartitionStore(0)
    records = [_with_due(0, b"acme/pay/A", reserved, Positions(1, 0)),
               _with_due(1, b"acme/pay/A", granted, Positions(1, 1))]
    apply_records(store, records, Positions(1, 1), GROUP, POLICY)
    assert store.get("acme/pay/A") == granted
    assert list(store.due_timers(2**62)) == [(due_ms(decode_row(granted), POLICY),
                                              "acme/pay/A")]


def test_a_basis_this_code_does_not_write_is_refused() -> None:
    for value in (b"s99999999999999999999", b"s4611686018427387905", b"s 12", b"s+5",
                  b"s1_0", b"s-5", b"s", b"", b"q12", b"-1", "s\u0661".encode()):
        with pytest.raises(ValueError):
            parse_due(value)
    assert parse_due(b"w4611686018427387904") == ("w", 2**62)
    assert parse_due(b"-") is None


def test_a_forged_basis_falls_back_to_the_row_on_a_rocksdb_store(tmp_path: Path) -> None:
    """A base too large for the timer index would fail the store write (and every
    restart's restore): it is refused, and the row itself says."""
    reserved, _ = _states()
    store = RocksDBPartitionStore(tmp_path / "p0", 0)
    try:
        apply_records(store, [_with_due(0, b"acme/pay/A", reserved, Positions(1, 1),
                                        b"s99999999999999999999")],
                      Positions(1, 1), GROUP, POLICY)
        assert list(store.due_timers(2**62)) == [(due_ms(decode_row(reserved), POLICY),
                                                  "acme/pay/A")]
    finally:
        store.close()


@given(states, policies)
def test_the_written_basis_gives_the_states_deadline_under_any_policy(
        state: KeyState, policy: Policy) -> None:
    _, value = due_header(deadline_basis(state))
    basis = parse_due(value)
    # An action's own replay window is not in the basis: restore reads such a seal's row
    # (tests/processor/test_action_policy.py).
    assume(not (basis is not None and basis[0] == SEAL and policy.windows_per_action))
    assert (None if basis is None else basis[1] + allowance(basis[0], policy)) \
        == due_ms(state, policy)


# -- the basis's version: ledger.due.v2 (the pre-grant's deadlines) ---------------------------

PREGRANT = Policy(pregrant_lease_ms=30_000)
PREGRANT_DUE = 1_000 + 30_000 + PREGRANT.clock_skew_ms  # the pre-grant's end, plus the skew


def _pregranted() -> tuple[bytes, bytes]:
    """Key A reserved under a pre-grant (to 31,000), then granted to its fencer."""
    event = intent(key="acme/pay/A", at_ms=1_000)
    reserved = decide(absent(event.key), event, PREGRANT, 1_000).state
    fenced = decide(reserved, claim(key=event.key, at_ms=2_000, fenced=True), PREGRANT,
                    2_000).state
    return encode_row(reserved), encode_row(fenced)


def _restored(row: bytes, row_headers: list[tuple[str, bytes]], policy: Policy = PREGRANT
              ) -> list[tuple[int, str]]:
    store = MemoryPartitionStore(0)
    record = parse(0, b"acme/pay/A", row, [*headers(GROUP, Positions(1, 1)), *row_headers])
    apply_records(store, [record], Positions(1, 1), GROUP, policy)
    return list(store.due_timers(2**62))


def test_the_pre_grants_deadlines_come_from_the_v2_basis(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert DUE == "ledger.due.v2"
    _undecodable(monkeypatch)
    for row in _pregranted():
        assert _restored(row, [due_header(deadline_basis(decode_row(row)))]) \
            == [(PREGRANT_DUE, "acme/pay/A")]


def test_a_v1_basis_is_decoded_not_trusted() -> None:
    """A processor before v2 wrote a pre-granted key's basis as its stall timer's (``s``,
    from 1,000): trusted, the key would wait ``stall_after`` for its copy. The row decoded
    gives the pre-grant's end plus the skew."""
    reserved, _ = _pregranted()
    assert _restored(reserved, [("ledger.due.v1", b"s1000")]) == [(PREGRANT_DUE, "acme/pay/A")]
    # A v1 row of a key without a pre-grant reads back as v1 said.
    for row in _states():
        basis = deadline_basis(decode_row(row))
        assert basis is not None and basis[0] in ("s", "l")
        assert _restored(row, [("ledger.due.v1", due_header(basis)[1])], POLICY) == [
            (basis[1] + allowance(basis[0], POLICY), "acme/pay/A")]


def test_a_basis_under_a_name_this_code_does_not_know_is_ignored() -> None:
    """What an older processor does with a newer one's header (its name carries the
    version it does not know): the record parses without a basis and the row is decoded."""
    reserved, fenced = _pregranted()
    record = parse(0, b"acme/pay/A", reserved,
                   [*headers(GROUP, Positions(1, 1)), ("ledger.due.v3", b"p1")])
    assert record.due is None and record.group == GROUP
    assert _restored(fenced, [("ledger.due.v3", b"f1")]) == [(PREGRANT_DUE, "acme/pay/A")]
