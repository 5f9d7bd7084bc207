"""``repartition`` refuses while a key it would move holds a pre-grant its fencer may still
claim (operate/pregrants.py): such a claim, written to the old partition after the check
and forwarded, would be stamped again and read behind the new partition's records."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_stream.domain import decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Freeze, Hold
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.operate.pregrants import running_pregrants
from ledger_stream.state.rows import encode_row
from tests.domain.decisions import POLICY, run
from tests.factories import KEY, claim, intent

pytestmark = pytest.mark.timeout(30)

LEASE = 30_000
PRE = replace(POLICY, pregrant_lease_ms=LEASE)
SKEW = PRE.clock_skew_ms  # the margin passed (repartition passes twice the skew)
AT = 1_000
END = AT + LEASE
OLD, TO = 3, 6
FROZEN = Hold(Freeze("", "refund", ev.FreezeMode.HOLD, "incident", "ops", "f-1", 500))
MOVES = next(f"acme/refund/m-{i}".encode() for i in range(100)
             if partition_for(f"acme/refund/m-{i}".encode(), OLD)
             != partition_for(f"acme/refund/m-{i}".encode(), TO))
STAYS = next(f"acme/refund/s-{i}".encode() for i in range(100)
             if partition_for(f"acme/refund/s-{i}".encode(), OLD)
             == partition_for(f"acme/refund/s-{i}".encode(), TO))


def reserved(policy=PRE) -> KeyState:
    state, _ = run([intent(at_ms=AT)], policy=policy)
    return state


def named(state: KeyState, checked_ms: int, key: bytes = MOVES) -> list[tuple[str, int]]:
    return running_pregrants([(partition_for(key, OLD), key, encode_row(state))], TO,
                             checked_ms, SKEW)


def test_a_moved_key_waiting_for_its_fencer_is_named_until_the_end_plus_the_skew():
    state = reserved()
    assert (state.phase, state.pregrant_until_ms) == (Phase.RESERVED, END)
    assert named(state, AT) == [(MOVES.decode(), END)]
    assert named(state, END + SKEW) == [(MOVES.decode(), END)]
    assert named(state, END + SKEW + 1) == []


def test_a_key_that_stays_or_has_no_pre_grant_is_not_named():
    assert named(reserved(), AT, STAYS) == []
    plain = reserved(POLICY)
    assert (plain.phase, plain.pregrant_until_ms, plain.lease_until_ms) == (
        Phase.RESERVED, 0, 0)
    assert named(plain, AT) == []


def test_the_end_kept_after_the_timers_copy_or_under_a_freeze_still_counts():
    """The pre-grant's timer offered a plain copy (the end kept as the lease), or a freeze
    withheld the grant of a claim read at the end: a fenced claim appended before the end
    is still its fencer's, so the key is named until the end plus the skew."""
    timed, _ = run([ev.Timer(KEY, END + SKEW)], reserved(), PRE)
    held = decide(reserved(), claim(claim_id="c2", at_ms=END), PRE, END, FROZEN).state
    for state, phase in ((timed, Phase.RESERVED), (held, Phase.HELD)):
        assert (state.phase, state.pregrant_until_ms, state.lease_until_ms) == (phase, 0, END)
        assert named(state, END + SKEW) == [(MOVES.decode(), END)]
        assert named(state, END + SKEW + 1) == []


def test_a_key_granted_to_its_fencer_is_not_named():
    """Only one connector fences a record: once its claim is granted nobody else can
    hold attempt 1 by a fenced claim, and the grant's lease is an ordinary holder's."""
    granted = decide(reserved(), claim(claim_id="c1", at_ms=2_000, lease_ms=5_000,
                                       fenced=True), PRE, 2_000, appended_ms=2_000).state
    assert (granted.phase, granted.lease_until_ms) == (Phase.DISPATCHED, END)
    assert named(granted, AT) == []
