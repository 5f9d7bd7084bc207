"""Freezes and held keys carried into a grown layout (operate/carry.py): every new partition
gets the freezes and applied commands of the partition its keys came from, each held key's
entry moves with the key in its held order, and partitions that disagree on the freezes in
force are refused."""

from __future__ import annotations

import json

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Containment, Freeze
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.operate.carry import CarryRefused, carried_rows

FROZEN = Freeze("acme", "refund", ev.FreezeMode.HOLD, "drill", "ops", "e-1", 1)
APPLIED = ("0123456789abcdef",)
OLD, TO = 3, 6


def row(freezes: tuple[Freeze, ...] = (FROZEN,), held: tuple[str, ...] = ()) -> bytes:
    entries = tuple(("acme/refund", key) for key in held)
    return json.dumps(Containment(freezes, entries, applied=APPLIED).to_row()).encode()


def decoded(data: bytes) -> Containment:
    return Containment.from_row(json.loads(data))


def keys_of(p: int, n: int = 6) -> list[str]:
    """``n`` keys homed at old partition ``p``."""
    found = (f"acme/refund/k-{i}" for i in range(10_000))
    return [k for k in found if partition_for(k, OLD) == p][:n]


def test_held_keys_move_with_their_keys_in_order_and_freezes_reach_new_partitions() -> None:
    held = {p: keys_of(p) for p in range(OLD)}
    rows = carried_rows({p: row(held=tuple(held[p])) for p in range(OLD)}, TO)
    assert set(rows) >= set(range(OLD, TO)), "every new partition gets the freezes"
    every: list[str] = []
    for q in range(TO):
        got = decoded(rows[q]) if q in rows else decoded(row(held=tuple(held[q])))
        assert got.freezes == (FROZEN,) and got.applied == APPLIED
        want = [k for k in held[q % OLD] if partition_for(k, TO) == q]
        assert [k for _, k in got.held] == want, q
        every.extend(k for _, k in got.held)
    assert sorted(every) == sorted(k for p in range(OLD) for k in held[p]), "each once"


def test_lifted_freezes_carry_the_applied_commands_only_to_new_partitions() -> None:
    rows = carried_rows({p: row(freezes=()) for p in range(OLD)}, TO)
    assert set(rows) == set(range(OLD, TO))
    assert all(decoded(r) == Containment(applied=APPLIED) for r in rows.values())


def test_no_containment_carries_nothing() -> None:
    assert carried_rows(dict.fromkeys(range(OLD)), TO) == {}


def test_partitions_that_disagree_on_the_freezes_are_refused() -> None:
    with pytest.raises(CarryRefused, match="disagree on the freezes in force"):
        carried_rows({0: row(), 1: row(), 2: row(freezes=())}, TO)
    with pytest.raises(CarryRefused, match="disagree on the freezes in force"):
        carried_rows({0: row(), 1: row(), 2: None}, TO)


def test_an_unreadable_row_is_refused() -> None:
    with pytest.raises(CarryRefused, match="partition 1 cannot be read"):
        carried_rows({0: row(), 1: b"{not json", 2: row()}, TO)
