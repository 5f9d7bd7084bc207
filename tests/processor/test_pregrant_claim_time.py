"""A fenced claim read after the partition clock passed the pre-grant's end (the intents
topic read ahead of the attempts topic): the batch decides it by its own record's broker
timestamp, so a claim appended within the pre-grant is its fencer's, with or without an
operator's freeze in hold mode, and whether or not the pre-grant's timer fired first."""

from __future__ import annotations

import uuid

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import command_key
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import Phase
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.changelog import Positions
from ledger_stream.state import MemoryPartitionStore
from tests.factories import claim, intent
from tests.processor.fakes import (
    ATTEMPTS,
    CODEC,
    INTENTS,
    PARTITIONS,
    FakeMessage,
    make_step,
    record_of,
)

pytestmark = pytest.mark.timeout(30)

KEY, OTHER = "acme/refund/k1", "acme/refund/k3"  # one partition
P = partition_for(KEY, PARTITIONS)
LEASE, SKEW = 30_000, 1_000
POLICY = Policy(pregrant_lease_ms=LEASE, stall_after_ms=60_000, clock_skew_ms=SKEW)
AT = 1_000  # the intent's broker time
END = AT + LEASE  # the pre-grant's end
FENCED_AT = END - 1_000  # the fenced claim's own broker time, within the pre-grant


def _command(frozen: bool, offset: int, timestamp: int) -> FakeMessage:
    event = ev.Containment(f"f-{frozen}", P, "refund", "acme", frozen, ev.FreezeMode.HOLD,
                           "incident", "ops", 0)
    return FakeMessage(ATTEMPTS, P, offset, timestamp, command_key(event.event_id,
                                                                   uuid.uuid4().hex),
                       CODEC.encode(event))


def _reserved(frozen: bool) -> tuple[Batch, int]:
    """A batch that decided KEY's intent at AT (pre-granted to END), then, ``frozen``, a hold
    freeze at AT + 1,000; and the attempts offset the next record takes."""
    batch = Batch(make_step(POLICY), {P: MemoryPartitionStore(P)}, {P: Positions()},
                  (INTENTS, ATTEMPTS))
    batch.add(record_of(intent(key=KEY), INTENTS, 0, AT))
    if not frozen:
        return batch, 0
    batch.add(_command(True, 0, AT + 1_000))
    return batch, 1


def _decided(batch: Batch) -> list[object]:
    return [CODEC.decode(o.value) for o in batch.outputs]


def _grants(outputs: list[object]) -> list[tuple[str, int]]:
    return [(o.claim_id, o.lease_until_ms) for o in outputs if isinstance(o, ev.Grant)]


@pytest.mark.parametrize("frozen", [True, False], ids=["hold-freeze", "no-freeze"])
@pytest.mark.parametrize("read_at", [END + 500, END + SKEW + 5_000],
                         ids=["past-the-end", "past-the-timer"])
def test_a_fenced_claim_read_after_the_intents_ran_ahead_is_granted_to_its_fencer(
        frozen, read_at):
    """Intent at 1,000 (pre-granted to 31,000), perhaps a hold freeze at 2,000; the intents
    topic is read to ``read_at`` (past the end; the second case past the end plus the skew,
    so the pre-grant's timer fires first) before the fencer's claim, appended at 30,000, is
    read. The fencer is calling already: its claim is granted under the pre-grant, and no
    other claim for attempt 1 is, the unfreeze and the timer's plain copy included."""
    batch, attempts = _reserved(frozen)
    batch.add(record_of(intent(key=OTHER), INTENTS, 1, read_at))  # read ahead
    assert batch.overlays[P].clock == read_at > END
    batch.add(record_of(claim(claim_id="c1", key=KEY, fenced=True), ATTEMPTS, attempts,
                        FENCED_AT))
    outputs = _decided(batch)
    assert _grants(outputs) == [("c1", END)]  # under the pre-grant: its end is the lease
    assert not [o for o in outputs if isinstance(o, ev.Held) and o.claim_id == "c1"]
    state = batch.overlays[P].state(KEY)
    assert (state.phase, state.granted_claim_id) == (Phase.DISPATCHED, "c1")
    # Later in the attempts log: the unfreeze, and a plain claim (the timer's copy's or
    # the released Dispatch's) from another connector. Never granted attempt 1.
    if frozen:
        attempts += 1
        batch.add(_command(False, attempts, read_at + 100))
    batch.add(record_of(claim(claim_id="c2", key=KEY), ATTEMPTS, attempts + 1, read_at + 200))
    assert [c for c, _ in _grants(_decided(batch))] == ["c1"]


def test_a_fenced_claim_appended_after_the_pre_grants_end_is_held_under_a_freeze():
    """The other side of the rule: appended at the end, the fencer's lease no longer covers
    a call (it reports ``not_called``), and the claim is decided as without a pre-grant."""
    batch, attempts = _reserved(frozen=True)
    batch.add(record_of(claim(claim_id="c1", key=KEY, fenced=True), ATTEMPTS, attempts, END))
    outputs = _decided(batch)
    assert not _grants(outputs)
    assert [o.claim_id for o in outputs if isinstance(o, ev.Held)] == ["c1"]
    assert batch.overlays[P].state(KEY).phase is Phase.HELD


@pytest.mark.parametrize("frozen", [True, False], ids=["hold-freeze", "no-freeze"])
def test_a_plain_claim_appended_before_the_end_and_read_after_it_is_held(frozen):
    """A connector that could not fence the record (dropped from its group, still reading
    it) claims plainly at 20,000; the fencer claims at 25,000 and is calling. The intents
    topic was read past the end first (found by a hostile review: the plain claim, judged at
    the clock, was granted and the fencer held, two callers of attempt 1). The plain claim
    is held, the fencer granted, and the plain claimant's next claim finds the key taken."""
    batch, attempts = _reserved(frozen)
    batch.add(record_of(intent(key=OTHER), INTENTS, 1, END + 500))  # read ahead
    batch.add(record_of(claim(claim_id="plain", key=KEY), ATTEMPTS, attempts, 20_000))
    batch.add(record_of(claim(claim_id="fencer", key=KEY, fenced=True), ATTEMPTS,
                        attempts + 1, 25_000))
    outputs = _decided(batch)
    assert _grants(outputs) == [("fencer", END)]
    assert [o.claim_id for o in outputs if isinstance(o, ev.Held)] == ["plain"]
    batch.add(record_of(claim(claim_id="plain-2", key=KEY), ATTEMPTS, attempts + 2,
                        END + 600))
    assert [c for c, _ in _grants(_decided(batch))] == ["fencer"]
