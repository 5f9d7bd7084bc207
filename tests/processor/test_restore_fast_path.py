"""Restore's fast path for consumed records (``_Applier.add_consumed``: one verdict per
batch, read from headers in the order the processor writes them) against the general path
(``add(changelog.parse(...))``, tested in test_restore.py) on the same records: every
shape of headers a careless or foreign producer could write, and the processor's own. The
two stores must end equal: rows, timer index, clock, changelog offset, and counts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_stream.domain import decide
from ledger_stream.domain.deadlines import deadline_basis
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import absent
from ledger_stream.processor.changelog import (
    ATTEMPTS,
    CLOCK_KEY,
    DUE,
    GROUP,
    INTENTS,
    Positions,
    due_header,
    parse,
)
from ledger_stream.processor.restore import _Applier
from ledger_stream.state import MemoryPartitionStore, encode_row
from tests.factories import claim, intent

pytestmark = pytest.mark.timeout(60)

POLICY = Policy()
OURS = "ledger-processor"


def _rows() -> list[tuple[bytes, bytes]]:
    """(row, its due header value) of a reserved and a granted key state, each plainly and
    under a pre-grant (granted to its fencer)."""
    event = intent(key="acme/pay/A", at_ms=1_000)
    found = []
    for policy, fenced in ((POLICY, False), (Policy(pregrant_lease_ms=30_000), True)):
        reserved = decide(absent(event.key), event, policy, 1_000).state
        granted = decide(reserved, claim(key=event.key, at_ms=2_000, fenced=fenced), policy,
                         2_000).state
        found += [(encode_row(s), due_header(deadline_basis(s))[1]) for s in (reserved, granted)]
    return found


ROWS = _rows()
NUMBER = st.sampled_from([b"0", b"3", b"5", b"7", b"-1", b"x", b"", b" 5", b"1_0", "4"])
Record = tuple[bytes | None, bytes | None, Any]


@st.composite
def batches(draw: Any) -> list[Record]:
    """One batch's records: they share the batch's group and positions headers (as the
    processor writes them), each record with its own kind, due basis and, now and then,
    headers bent out of the processor's shape."""
    group = draw(st.sampled_from([OURS.encode(), OURS.encode(), b"another", OURS, b""]))
    intents, attempts = draw(NUMBER), draw(NUMBER)
    found = []
    for _ in range(draw(st.integers(1, 6))):
        found.append(draw(records(group, intents, attempts)))
    return found


@st.composite
def records(draw: Any, group: Any, intents: Any, attempts: Any) -> Record:
    kind = draw(st.sampled_from(["row", "row", "row", "clock", "tombstone"]))
    key: bytes | None
    value: bytes | None
    due: Any
    if kind == "clock":
        key, value, due = CLOCK_KEY, b"%d" % draw(st.integers(0, 10**6)), None
    else:
        key = draw(st.sampled_from([b"acme/pay/A", b"acme/pay/B", b"", None]))
        row, basis = draw(st.sampled_from(ROWS))
        value = None if kind == "tombstone" else row
        due = draw(st.sampled_from([basis, basis, b"-", b"Z99", b"s", "l5", "s7", None]))
    found: list[tuple[str, Any]] = [(GROUP, group), (INTENTS, intents), (ATTEMPTS, attempts)]
    if kind != "clock":
        found.append((DUE, due))
    shape = draw(st.sampled_from(["as written"] * 4 + [
        "shuffled", "extra", "short", "none", "a value missing", "other positions",
        "no due (an older processor's row)", "an older basis's version (ledger.due.v1)",
        *(f"foreign in place {at}" for at in range(len(found)))]))
    if shape == "shuffled":
        found = draw(st.permutations(found))
    elif shape == "extra":
        found.append(("traceparent", b"00-ab"))
    elif shape.startswith("foreign in place"):  # another header where one of ours belongs
        at = int(shape.rsplit(" ", 1)[1])
        found[at] = ("traceparent", draw(st.sampled_from([found[at][1], b"s5"])))
    elif shape == "no due (an older processor's row)":
        found = found[:3]
    elif shape == "an older basis's version (ledger.due.v1)" and len(found) == 4:
        found[3] = ("ledger.due.v1", found[3][1])
    elif shape == "short":
        found = found[:2]
    elif shape == "none":
        return key, value, None
    elif shape == "a value missing":
        at = draw(st.integers(0, len(found) - 1))
        found[at] = (found[at][0], None)
    elif shape == "other positions":  # a record with another position than its batch
        found[draw(st.integers(1, 2))] = (ATTEMPTS, draw(NUMBER))
    return key, value, found


def _state(applier: _Applier, store: MemoryPartitionStore) -> tuple[Any, ...]:
    keys = ["acme/pay/A", "acme/pay/B", ""]
    return (applier.stats.applied, applier.stats.skipped, store.changelog_offset,
            store.clock_ms, [store.get(k) for k in keys], list(store.due_timers(2**62)))


@settings(max_examples=250, deadline=None)
@given(batch=st.lists(batches(), max_size=12).map(lambda b: [r for x in b for r in x]),
       intents=st.integers(-1, 12), attempts=st.integers(-1, 12), start=st.integers(0, 3),
       chunk=st.sampled_from([1, 3, 100]))
def test_the_fast_path_restores_what_the_general_path_restores(
        batch: list[tuple[bytes | None, bytes | None, Any]], intents: int, attempts: int,
        start: int, chunk: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ledger_stream.processor.restore.CHUNK", chunk)
        _compare(batch, Positions(intents, attempts), start)


def _compare(batch: list[tuple[bytes | None, bytes | None, Any]], committed: Positions,
             start: int) -> None:
    fast_store, general_store = MemoryPartitionStore(0), MemoryPartitionStore(0)
    fast = _Applier(fast_store, committed, OURS, POLICY, start)
    general = _Applier(general_store, committed, OURS, POLICY, start)
    for offset, (key, value, headers) in enumerate(batch, start):
        fast.add_consumed(offset, key, value, headers)
        general.add(parse(offset, key, value, headers))
    end = start + len(batch) + 2
    fast.finish(end)
    general.finish(end)
    assert _state(fast, fast_store) == _state(general, general_store)


def test_one_batch_is_parsed_once() -> None:
    """The point of the fast path: records of one batch share a verdict."""
    store = MemoryPartitionStore(0)
    applier = _Applier(store, Positions(10, 10), OURS, POLICY, 0)
    calls = []
    import ledger_stream.processor.restore as restore

    real = restore.changelog.parse

    def counting(*args: Any) -> Any:
        calls.append(args[0])
        return real(*args)

    row, due = ROWS[0]
    headers = [(GROUP, OURS.encode()), (INTENTS, b"5"), (ATTEMPTS, b"5"), (DUE, due)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(restore.changelog, "parse", counting)
        for offset in range(50):
            applier.add_consumed(offset, b"acme/pay/%d" % offset, row, list(headers))
    applier.finish(50)
    assert calls == [0]
    assert applier.stats.applied == 50


@pytest.mark.parametrize(("first", "second"), [
    ((b"another", b"3", b"3"), (OURS.encode(), b"3", b"3")),  # only the group differs
    ((OURS.encode(), b"3", b"3"), (OURS.encode(), b"7", b"3")),  # only intents
    ((OURS.encode(), b"3", b"3"), (OURS.encode(), b"3", b"7")),  # only attempts
    ((OURS.encode(), b"3", b"7"), (OURS.encode(), b"3", b"3")),
])
def test_adjacent_batches_differing_in_one_header_each_get_their_own_verdict(
        first: tuple[bytes, bytes, bytes], second: tuple[bytes, bytes, bytes]) -> None:
    row, basis = ROWS[0]

    def headers(batch: tuple[bytes, bytes, bytes]) -> list[tuple[str, bytes]]:
        return [(GROUP, batch[0]), (INTENTS, batch[1]), (ATTEMPTS, batch[2])]

    _compare([(CLOCK_KEY, b"5", headers(first)), (CLOCK_KEY, b"6", headers(second)),
              (b"acme/pay/A", row, [*headers(first), (DUE, basis)]),
              (b"acme/pay/B", row, [*headers(second), (DUE, basis)])], Positions(5, 5), 0)
