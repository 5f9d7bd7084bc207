"""The connector core's pre-grant path (docs/connectors.md, 'The pre-granted first attempt'),
step by step without Kafka: a live Dispatch carrying ``lease_until_ms`` is fenced (its
offset committed) only at the partition's commit frontier, then claimed with ``fenced`` and
called once that claim is recorded, without waiting for the processor's answer. Every other
case takes the plain path: claim and wait for the Grant."""

from __future__ import annotations

import itertools

import pytest

from ledger_stream.connector.commands import Call, Commit, Fence, Produce, Record, Stop
from ledger_stream.connector.core import ConnectorCore
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.connector.pregrant import FENCE_RETRY_MS
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json
from tests.connectors.checked_core import CheckedCore

pytestmark = pytest.mark.timeout(30)

OS = ev.OutcomeStatus
# A call needs 3,000 ms of lease (call timeout + record margin) and 500 ms of skew margin.
OPTS = ConnectorOptions(instance_id="c", lease_ms=10_000, call_timeout_s=2.0,
                        record_margin_s=1.0, clock_skew_ms=500, max_in_flight=4)
NEEDED = 3_000 + 500
LEASE_END = 31_000  # the pre-grant's lease end in these tests
LAST_START = LEASE_END - NEEDED  # the latest time a call under it may start
ARGS = {"amount": 10}


def core(options: ConnectorOptions = OPTS, deduplicates: bool = False) -> ConnectorCore:
    ids = itertools.count(1)
    c = CheckedCore("t", deduplicates, True, options, lambda: f"id{next(ids)}")
    for p in (0, 1):
        c.assigned(p)
    return c


def dispatch(key: str = "acme/pay/k1", lease_until: int = LEASE_END) -> ev.Dispatch:
    return ev.Dispatch(f"d-{key}", key, 1, "i1", "acme", "pay", "t", canonical_json(ARGS),
                       args_hash(ARGS), "", 0, 0, lease_until)


def rec(event: object, offset: int, partition: int = 0, backlog: bool = False) -> Record:
    return Record(partition, offset, event, 0, backlog)


def only(commands, kind):
    found = [c for c in commands if isinstance(c, kind)]
    assert len(found) == 1, commands
    return found[0]


def kinds(commands) -> list[str]:
    return [type(c).__name__ for c in commands]


def fenced_claim(c: ConnectorCore, fence: Fence, now: int = 1_010) -> Produce:
    claim = only(c.fenced(fence.job_id, True, now), Produce)
    assert isinstance(claim.event, ev.AttemptClaim) and claim.event.fenced
    return claim


def plain_claim(commands) -> Produce:
    assert not any(isinstance(x, Fence | Call) for x in commands), commands
    claim = only(commands, Produce)
    assert isinstance(claim.event, ev.AttemptClaim) and not claim.event.fenced
    return claim


# --- the path -------------------------------------------------------------------------------


def test_a_live_pregranted_dispatch_is_fenced_claimed_then_called_under_its_lease():
    c = core()
    fence = only(c.record(rec(dispatch(), 4), 1_000), Fence)
    assert (fence.partition, fence.offset) == (0, 5)  # the record's offset + 1
    claim = fenced_claim(c, fence)
    call = only(c.produced(claim.job_id, True, 1_020), Call)
    assert call.start_by_ms == LAST_START
    assert call.request.attempt_id == claim.event.claim_id
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_500), Produce)
    assert report.event.claim_id == claim.event.claim_id
    # The fence committed offset 5 already: finishing the job commits nothing again.
    assert c.produced(report.job_id, True, 1_600) == []
    assert c.idle() and c.in_flight() == 0


def test_the_claim_is_recorded_before_the_call():
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    assert kinds(c.fenced(fence.job_id, True, 1_010)) == ["Produce"]  # no Call yet
    claim_job = fence.job_id
    assert [type(x) for x in c.produced(claim_job, False, 1_020, "nack")] == [Stop]
    assert c.tick(40_000) == []


def test_the_call_does_not_wait_for_the_processors_answer_and_ignores_it():
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    claim = fenced_claim(c, fence)
    call = only(c.produced(claim.job_id, True, 1_020), Call)  # no Grant read
    cid = claim.event.claim_id
    for n, answer in enumerate((ev.Grant("acme/pay/k1", 1, cid, LEASE_END, 1_030),
                                ev.Held("acme/pay/k1", 1, cid, LEASE_END, 1_031)), start=1):
        # Read and ignored: the fenced record is handled for the frontier, so they commit.
        assert c.record(rec(answer, n), 1_040) == [Commit(0, n + 1)]
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_500), Produce)
    assert c.produced(report.job_id, True, 1_600) == []
    assert c.tick(LEASE_END + 5_000) == [] and c.idle()


def test_a_fenced_claim_recorded_too_late_is_reported_not_called():
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    claim = fenced_claim(c, fence)
    withdrawal = only(c.produced(claim.job_id, True, LAST_START + 1), Produce)
    assert (withdrawal.event.status, withdrawal.event.claim_id) == (
        OS.NOT_CALLED, claim.event.claim_id)
    assert "pre-grant had" in withdrawal.event.error
    assert c.produced(withdrawal.job_id, True, LAST_START + 2) == []
    assert c.idle()


def test_a_copy_of_a_dispatch_whose_fenced_claim_was_withdrawn_is_claimed_again():
    """A fenced claim recorded too late (a freeze held the key past the pre-grant) is
    withdrawn as ``not_called``; the processor takes that as nobody's report. The copy the
    unfreeze sends (same dispatch id, no pre-grant) must be claimed, not skipped as handled:
    skipped, the key stays RESERVED for good (the protocol model's finding)."""
    c = core()
    claim = fenced_claim(c, only(c.record(rec(dispatch(), 0), 1_000), Fence))
    withdrawal = only(c.produced(claim.job_id, True, LAST_START + 1), Produce)
    assert withdrawal.event.status is OS.NOT_CALLED
    c.produced(withdrawal.job_id, True, LAST_START + 2)
    again = plain_claim(c.record(rec(dispatch(lease_until=0), 1), LEASE_END + 600))
    assert again.event.claim_id != claim.event.claim_id


def test_a_copy_of_a_dispatch_whose_call_never_started_is_claimed_again():
    """The same with the fencer's call refused by its own start-by check (``not_called``
    reported from the call, not withdrawn before it): its dispatch stays unhandled too."""
    c = core()
    claim = fenced_claim(c, only(c.record(rec(dispatch(), 0), 1_000), Fence))
    call = only(c.produced(claim.job_id, True, 1_020), Call)
    report = only(c.called(call.job_id, OS.NOT_CALLED, "", "lease ran out before the call",
                           LAST_START + 1), Produce)
    assert report.event.status is OS.NOT_CALLED
    c.produced(report.job_id, True, LAST_START + 2)
    plain_claim(c.record(rec(dispatch(lease_until=0), 1), LEASE_END + 600))


def test_a_copy_of_a_dispatch_already_called_is_skipped():
    c = core()
    claim = fenced_claim(c, only(c.record(rec(dispatch(), 0), 1_000), Fence))
    call = only(c.produced(claim.job_id, True, 1_020), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_500), Produce)
    c.produced(report.job_id, True, 1_600)
    assert c.record(rec(dispatch(lease_until=0), 1), 2_000) == [Commit(0, 2)]


def test_a_fenced_claim_recorded_at_the_last_start_is_called():
    c = core()
    claim = fenced_claim(c, only(c.record(rec(dispatch(), 0), 1_000), Fence))
    assert only(c.produced(claim.job_id, True, LAST_START), Call).start_by_ms == LAST_START


# --- the frontier ---------------------------------------------------------------------------


def test_a_record_is_fenced_only_once_every_record_before_it_is_handled():
    c = core()
    earlier = plain_claim(c.record(rec(dispatch("acme/pay/a", lease_until=0), 0), 1_000))
    assert c.record(rec(dispatch("acme/pay/b"), 1), 1_001) == []  # frontier still at 0
    assert c.tick(1_500) == []
    c.produced(earlier.job_id, True, 1_010)
    grant = ev.Grant("acme/pay/a", 1, earlier.event.claim_id, 30_000, 1_020)
    call = only(c.record(rec(grant, 2), 1_030), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "x", "", 1_100), Produce)
    done = c.produced(report.job_id, True, 1_200)
    assert Commit(0, 1) in done
    fence = only(done, Fence)  # woken by the frontier reaching it, not by a timer
    assert (fence.partition, fence.offset) == (0, 2)
    # Fenced: record 1 is handled for the frontier, and the Grant at 2 was handled already.
    assert Commit(0, 3) in c.fenced(fence.job_id, True, 1_210)


def test_the_frontier_wakes_a_record_past_a_transaction_marker():
    """A transactional producer (the exactly-once processor, the only one that pre-grants)
    leaves a commit marker after each transaction: the next record's offset is one past
    the previous record's end. The frontier reaching it must still wake its fence."""
    c = core()
    earlier = plain_claim(c.record(rec(dispatch("acme/pay/a", lease_until=0), 0), 1_000))
    # offset 1: the commit marker of the transaction that wrote record 0 (never read)
    assert c.record(rec(dispatch("acme/pay/b"), 2), 1_001) == []  # frontier still at 0
    c.produced(earlier.job_id, True, 1_010)
    # offset 3: a marker; the Grant at 4
    grant = ev.Grant("acme/pay/a", 1, earlier.event.claim_id, 30_000, 1_020)
    call = only(c.record(rec(grant, 4), 1_030), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "x", "", 1_100), Produce)
    done = c.produced(report.job_id, True, 1_200)
    assert Commit(0, 1) in done
    fence = only(done, Fence)  # now, not LAST_START ms later, as a plain claim held
    assert (fence.partition, fence.offset) == (0, 3)


def test_a_pregrant_whose_frontier_comes_too_late_takes_the_plain_path():
    c = core()
    plain_claim(c.record(rec(dispatch("acme/pay/a", lease_until=0), 0), 1_000))
    assert c.record(rec(dispatch("acme/pay/b"), 1), 1_001) == []
    assert c.next_wake_ms() == LAST_START + 1
    assert c.tick(LAST_START) == []
    claim = plain_claim(c.tick(LAST_START + 1))
    assert claim.event.key == "acme/pay/b"
    # It now waits for the processor's answer like any plain claim.
    assert c.produced(claim.job_id, True, LAST_START + 10) == []


def test_a_pregrant_gone_plain_and_held_is_not_woken_when_the_frontier_reaches_it():
    c = core()
    earlier = plain_claim(c.record(rec(dispatch("acme/pay/a", lease_until=0), 0), 1_000))
    c.record(rec(dispatch("acme/pay/b"), 1), 1_001)
    claim = plain_claim(c.tick(LAST_START + 1))
    c.produced(claim.job_id, True, LAST_START + 10)
    held = ev.Held("acme/pay/b", 1, claim.event.claim_id, LEASE_END, LAST_START + 20)
    assert c.record(rec(held, 2), LAST_START + 30) == []  # waits until the lease ends
    c.produced(earlier.job_id, True, LAST_START + 40)
    grant = ev.Grant("acme/pay/a", 1, earlier.event.claim_id, LEASE_END + 9_000, 1)
    call = only(c.record(rec(grant, 3), LAST_START + 50), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "x", "", LAST_START + 60), Produce)
    # The frontier reaches record 1: its job waits for the Held lease, not for a fence.
    assert c.produced(report.job_id, True, LAST_START + 70) == [Commit(0, 1)]
    assert c.next_wake_ms() == LEASE_END + 500


# --- the plain path -------------------------------------------------------------------------


def test_a_backlog_record_takes_the_plain_path():
    c = core()
    plain_claim(c.record(rec(dispatch(), 0, backlog=True), 1_000))


def test_a_pregrant_whose_lease_cannot_cover_the_call_takes_the_plain_path():
    c = core()
    plain_claim(c.record(rec(dispatch(lease_until=1_000 + NEEDED - 1), 0), 1_000))
    c2 = core()
    only(c2.record(rec(dispatch(lease_until=1_000 + NEEDED), 0), 1_000), Fence)


def test_a_dispatch_without_a_pregrant_takes_the_plain_path():
    c = core()
    plain_claim(c.record(rec(dispatch(lease_until=0), 0), 1_000))


def test_on_the_fast_path_a_live_pregrant_is_fenced_not_called_at_once():
    c = core(ConnectorOptions(instance_id="c", lease_ms=10_000, call_timeout_s=2.0,
                              record_margin_s=1.0, clock_skew_ms=500, fast_path=True),
             deduplicates=True)
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    claim = fenced_claim(c, fence)
    call = only(c.produced(claim.job_id, True, 1_020), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "x", "", 1_100), Produce)
    assert c.produced(report.job_id, True, 1_200) == []  # no answer awaited
    assert c.idle() and c.in_flight() == 0


# --- failed fences, revocation, shutdown ----------------------------------------------------


def test_a_failed_fence_never_calls_and_is_retried_while_a_call_still_fits():
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    assert c.fenced(fence.job_id, False, 1_010) == []
    assert c.next_wake_ms() == 1_010 + FENCE_RETRY_MS
    again = only(c.tick(1_010 + FENCE_RETRY_MS), Fence)
    assert again == fence
    # Failing up to the last start: still only fences.
    assert c.fenced(fence.job_id, False, LAST_START - FENCE_RETRY_MS) == []
    assert c.tick(LAST_START) == [fence]
    # It holds at last: the fenced claim goes out and is called.
    claim = fenced_claim(c, fence, LAST_START)
    assert only(c.produced(claim.job_id, True, LAST_START), Call).start_by_ms == LAST_START


def test_a_fence_failing_past_the_last_start_claims_plainly_and_waits_for_the_grant():
    """A fence that never passes (a refused authorization, a coordinator gone for good)
    is not asked every 20 ms for ever: once a fenced call could no longer start, the job
    claims plainly and calls only on the Grant naming that claim."""
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    assert c.fenced(fence.job_id, False, 1_010) == []
    assert c.tick(1_010 + FENCE_RETRY_MS) == [fence]
    claim = plain_claim(c.fenced(fence.job_id, False, LAST_START + 1))
    assert c.produced(claim.job_id, True, LAST_START + 10) == []  # waits for the answer
    assert not any(isinstance(x, Fence | Call) for x in c.tick(LAST_START + 5_000))
    held = ev.Held("acme/pay/k1", 1, claim.event.claim_id, LEASE_END, LAST_START + 20)
    assert c.record(rec(held, 1), LAST_START + 30) == []
    again = plain_claim(c.tick(LEASE_END + 500))  # after the pre-grant, as any Held claim
    c.produced(again.job_id, True, LEASE_END + 510)
    grant = ev.Grant("acme/pay/k1", 1, again.event.claim_id, LEASE_END + 20_000, 1)
    call = only(c.record(rec(grant, 2), LEASE_END + 520), Call)
    assert call.request.attempt_id == again.event.claim_id


def test_a_failed_fence_whose_retry_wakes_past_the_last_start_claims_plainly():
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    assert c.fenced(fence.job_id, False, LAST_START - 5) == []
    plain_claim(c.tick(LAST_START - 5 + FENCE_RETRY_MS))


def test_a_failed_fence_on_a_revoked_partition_is_dropped():
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    c.fenced(fence.job_id, False, 1_010)
    assert c.revoked([0], 1_020) == []  # nothing committed, nothing reported
    assert c.tick(5_000) == [] and c.idle() and c.in_flight() == 0


def test_a_fence_that_fails_after_its_partition_was_revoked_is_dropped():
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    assert c.revoked([0], 1_005) == []
    assert c.fenced(fence.job_id, False, 1_010) == []
    assert c.tick(5_000) == [] and c.idle() and c.in_flight() == 0


@pytest.mark.parametrize("stop", ["revoked", "shutdown"])
def test_revocation_or_shutdown_between_fence_and_call_reports_not_called(stop):
    c = core()
    claim = fenced_claim(c, only(c.record(rec(dispatch(), 0), 1_000), Fence))
    assert (c.revoked([0], 1_015) if stop == "revoked" else c.shutdown(1_015)) == []
    withdrawal = only(c.produced(claim.job_id, True, 1_020), Produce)
    assert (withdrawal.event.status, withdrawal.event.claim_id) == (
        OS.NOT_CALLED, claim.event.claim_id)
    assert c.produced(withdrawal.job_id, True, 1_030) == []
    assert c.in_flight() == 0


def test_a_fence_that_holds_after_a_revocation_is_claimed_then_not_called():
    c = core()
    fence = only(c.record(rec(dispatch(), 0), 1_000), Fence)
    c.revoked([0], 1_005)
    claim = fenced_claim(c, fence)  # its commit landed: the claim records who had it
    withdrawal = only(c.produced(claim.job_id, True, 1_020), Produce)
    assert withdrawal.event.status is OS.NOT_CALLED


def test_revocation_drops_a_pregrant_waiting_for_its_frontier():
    c = core()
    first = plain_claim(c.record(rec(dispatch("acme/pay/a", lease_until=0), 0), 1_000))
    c.record(rec(dispatch("acme/pay/b"), 1), 1_001)
    c.produced(first.job_id, True, 1_010)
    withdrawal = only(c.revoked([0], 1_020), Produce)  # the plain claim's not_called
    assert withdrawal.event.key == "acme/pay/a"
    assert c.tick(LAST_START + 1) == []  # the waiting pre-grant is gone, no plain claim
    c.produced(withdrawal.job_id, True, 1_030)
    assert c.in_flight() == 0


def test_no_fence_after_shutdown_and_no_fence_while_stopped():
    c = core()
    plain_claim(c.record(rec(dispatch("acme/pay/a", lease_until=0), 0), 1_000))
    c.record(rec(dispatch("acme/pay/b"), 1), 1_001)
    c.shutdown(1_010)
    assert not any(isinstance(x, Fence | Produce) for x in c.tick(LAST_START + 1))
    c2 = core()
    first = plain_claim(c2.record(rec(dispatch("acme/pay/a", lease_until=0), 0), 1_000))
    c2.record(rec(dispatch("acme/pay/b"), 1), 1_001)
    c2.produced(first.job_id, False, 1_010, "nack")
    assert c2.tick(LAST_START + 1) == []


def test_a_core_told_its_claims_cannot_say_fenced_claims_a_pregrant_plainly():
    """A connector writing an older release's AttemptClaim schema (no ``fenced``): its
    claim would reach the processor as plain and be held, so it never fences, nor calls
    before a Grant naming its claim."""
    ids = itertools.count(1)
    c = CheckedCore("t", False, True, OPTS, lambda: f"id{next(ids)}", pregrant=False)
    c.assigned(0)
    claim = plain_claim(c.record(rec(dispatch(), 4), 1_000))
    assert c.produced(claim.job_id, True, 1_010) == []  # waits for the answer
    held = ev.Held("acme/pay/k1", 1, claim.event.claim_id, LEASE_END, 1_020)
    assert not any(isinstance(x, Call) for x in c.record(rec(held, 5), 1_030))
