"""The connector core (docs/design.md, 'The connector protocol') step by step, without Kafka:
what it asks its driver to do for each thing that happens. Regression tests for the review's
connector defects 1, 2, 3 and 7 at the protocol level (the Kafka runtime tests repeat them on
the real broker)."""

from __future__ import annotations

import itertools
import threading

import pytest

from ledger_stream.connector.commands import Call, Commit, Lookup, LookupAnswer, Produce, Stop
from ledger_stream.connector.core import ConnectorCore
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json
from tests.connectors.checked_core import CheckedCore

pytestmark = pytest.mark.timeout(30)

OS = ev.OutcomeStatus
OPTS = ConnectorOptions(instance_id="c", lease_ms=10_000, call_timeout_s=2.0,
                        record_margin_s=1.0, clock_skew_ms=500, lookup_patience_s=5.0,
                        max_in_flight=4)
ARGS = {"amount": 10}




def core(options: ConnectorOptions = OPTS, deduplicates: bool = False,
         queryable: bool = True) -> ConnectorCore:
    ids = itertools.count(1)
    c = CheckedCore("t", deduplicates, queryable, options, lambda: f"id{next(ids)}")
    for p in (0, 1):
        c.assigned(p)
    return c


def dispatch(key: str = "acme/pay/k1", attempt: int = 1, not_before: int = 0) -> ev.Dispatch:
    return ev.Dispatch(f"d-{key}-{attempt}", key, attempt, "i1", "acme", "pay", "t",
                       canonical_json(ARGS), args_hash(ARGS), "", not_before, 0)


def rec(event: object, offset: int, partition: int = 0, ts: int = 0, backlog: bool = False):
    from ledger_stream.connector.commands import Record

    return Record(partition, offset, event, ts, backlog)


def only(commands, kind):
    found = [c for c in commands if isinstance(c, kind)]
    assert len(found) == 1, commands
    return found[0]


def claimed(c: ConnectorCore, d: ev.Dispatch, offset: int = 0, partition: int = 0,
            now: int = 1_000) -> Produce:
    claim = only(c.record(rec(d, offset, partition), now), Produce)
    assert isinstance(claim.event, ev.AttemptClaim)
    return claim


def test_grant_calls_then_reports_then_commits_only_after_the_ack():
    c = core()
    claim = claimed(c, dispatch())
    assert c.produced(claim.job_id, True, 1_010) == []  # waiting for the answer
    grant = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_020)
    call = only(c.record(rec(grant, 1), 1_030), Call)
    assert call.start_by_ms == 11_000 - 500 - 3_000
    again = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_025)  # a replay's copy
    assert not any(isinstance(x, Call) for x in c.record(rec(again, 2), 1_030))
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_500), Produce)
    assert report.event.status is OS.SUCCEEDED and report.event.claim_id == claim.event.claim_id
    assert Commit(0, 3) in c.produced(report.job_id, True, 1_600)


def test_only_a_job_waiting_for_this_process_asks_for_short_polls():
    """The runtime polls its feed for 5 ms instead of 50 while this is true: a finished call
    or a delivery report is seen only between polls."""
    c = core()
    assert not c.awaits_local()
    claim = claimed(c, dispatch())
    assert c.awaits_local()  # the claim's delivery report
    c.produced(claim.job_id, True, 1_010)
    assert not c.awaits_local()  # the processor's answer comes through the feed
    grant = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_020)
    call = only(c.record(rec(grant, 1), 1_030), Call)
    assert c.awaits_local()  # the call
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_500), Produce)
    assert c.awaits_local()  # the outcome's delivery report
    c.produced(report.job_id, True, 1_600)
    assert not c.awaits_local() and c.idle()


def test_the_worker_polls_briefly_only_while_a_job_waits_for_this_process():
    from ledger_stream.connector import runtime

    worker = runtime.ConnectorWorker.__new__(runtime.ConnectorWorker)
    worker._core, worker._lock, worker._asked = core(), threading.RLock(), {}
    assert worker._poll_timeout() == runtime.IDLE_POLL_S
    claimed(worker._core, dispatch())
    assert worker._poll_timeout() == runtime.LOCAL_POLL_S
    worker._asked[(0, 5)] = 1  # a fence outstanding: its answer does not end the poll
    assert worker._poll_timeout() == runtime.FENCE_POLL_S


def test_a_record_delivered_twice_is_handled_once():
    c = core()
    claimed(c, dispatch())
    assert c.record(rec(dispatch(), 0), 1_000) == []


def test_an_answer_read_before_the_claims_ack_is_not_lost():
    c = core()
    claim = claimed(c, dispatch())
    grant = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_020)
    assert not [x for x in c.record(rec(grant, 1), 1_030) if isinstance(x, Call)]
    only(c.produced(claim.job_id, True, 1_040), Call)


def test_waiting_for_an_answer_never_mints_a_new_claim():
    """Defect 3: processor lag must not burn an attempt."""
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    assert c.tick(500_000) == []  # minutes without an answer: still the same claim
    grant = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 510_000, 499_000)
    only(c.record(rec(grant, 1), 500_000), Call)


def test_a_grant_that_came_too_late_is_reported_not_called():
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    late = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_020)
    report = only(c.record(rec(late, 1), 8_000), Produce)  # 3 s left, 3.5 s needed
    assert report.event.status is OS.NOT_CALLED


def test_revocation_gives_waiting_claims_up_and_other_partitions_go_on():
    """Defect 1: a wait ends on revocation; the instance keeps serving its other keys."""
    c = core()
    waiting = claimed(c, dispatch("acme/pay/k1"), offset=0, partition=0)
    c.produced(waiting.job_id, True, 1_010)
    withdrawal = only(c.revoked([0], 2_000), Produce)
    assert (withdrawal.event.status, withdrawal.event.claim_id) == (
        OS.NOT_CALLED, waiting.event.claim_id)
    assert not [x for x in c.produced(withdrawal.job_id, True, 2_010) if isinstance(x, Commit)]
    other = claimed(c, dispatch("acme/pay/k2"), offset=0, partition=1, now=2_100)
    assert other.event.key == "acme/pay/k2"


def test_a_failed_ack_stops_and_nothing_is_committed_after_it():
    """Defect 2: a lost acknowledgement is never taken as success."""
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    call = only(c.record(rec(ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1),
                             1), 1_020), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "p", "", 1_100), Produce)
    assert isinstance(only(c.produced(report.job_id, False, 1_200, "timed out"), Stop), Stop)
    assert c.record(rec(ev.Done("acme/pay/k9", 1, "x", 1), 2), 1_300) == []


def test_a_slow_key_does_not_stall_the_others_and_one_key_runs_at_a_time():
    c = core(ConnectorOptions(**{**_opts(), "max_in_flight": 2}))
    a1 = claimed(c, dispatch("acme/pay/a"), 0)
    assert c.record(rec(dispatch("acme/pay/a", 2), 1), 1_000) == []  # same key: waits
    b = claimed(c, dispatch("acme/pay/b"), 2)
    assert c.record(rec(dispatch("acme/pay/c"), 3), 1_000) == []  # two in flight: queued
    assert b.event.key == "acme/pay/b" and a1.event.key == "acme/pay/a"


def test_commits_stay_in_partition_order():
    c = core()
    slow = claimed(c, dispatch("acme/pay/a"), 0)
    c.produced(slow.job_id, True, 1_001)
    fast = claimed(c, dispatch("acme/pay/b"), 1)
    c.produced(fast.job_id, True, 1_002)
    done = ev.Done("acme/pay/b", 1, fast.event.claim_id, 1_003)
    assert not [x for x in c.record(rec(done, 2), 1_004) if isinstance(x, Commit)]
    done_a = ev.Done("acme/pay/a", 1, slow.event.claim_id, 1_005)
    assert Commit(0, 4) in c.record(rec(done_a, 3), 1_006)


def test_held_claims_again_with_a_new_id_after_the_lease_and_the_skew():
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    held = ev.Held("acme/pay/k1", 1, claim.event.claim_id, 5_000, 1_020)
    assert c.record(rec(held, 1), 1_030) == []
    assert c.next_wake_ms() == 5_500
    assert c.tick(5_499) == []
    again = only(c.tick(5_500), Produce)
    assert again.event.claim_id != claim.event.claim_id


@pytest.mark.parametrize("answer", ["reconcile", "done"])
def test_reconcile_or_done_drops_the_dispatch_without_calling(answer):
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    cid = claim.event.claim_id
    event = ev.Reconcile("acme/pay/other", 1, cid, "x", 1) if answer == "reconcile" \
        else ev.Done("acme/pay/k1", 1, cid, 1)
    out = c.record(rec(event, 1), 1_030)
    assert not [x for x in out if isinstance(x, Call | Produce)]
    assert Commit(0, 2) in out


@pytest.mark.parametrize("backlog,age_ms,fast", [(False, 0, True), (True, 0, False),
                                                 (False, 120_000, False)])
def test_the_fast_path_is_only_for_live_dispatches(backlog, age_ms, fast):
    """Defect 7: a settled attempt is never sent again, whatever the target's retention."""
    c = core(ConnectorOptions(**{**_opts(), "fast_path": True}), deduplicates=True)
    claim = only(c.record(rec(dispatch(), 0, ts=1_000 - age_ms, backlog=backlog), 1_000),
                 Produce)
    out = c.produced(claim.job_id, True, 1_010)
    assert bool([x for x in out if isinstance(x, Call)]) is fast


def test_a_fast_path_call_still_waits_for_its_answer_and_claims_again_when_held():
    c = core(ConnectorOptions(**{**_opts(), "fast_path": True}), deduplicates=True)
    claim = only(c.record(rec(dispatch(), 0, ts=1_000), 1_000), Produce)
    call = only(c.produced(claim.job_id, True, 1_010), Call)
    report = only(c.called(call.job_id, OS.NOT_APPLIED, "", "503", 1_100), Produce)
    assert c.produced(report.job_id, True, 1_200) == []  # not finished: no answer yet
    held = ev.Held("acme/pay/k1", 1, claim.event.claim_id, 2_000, 1_050)
    assert c.record(rec(held, 1), 1_300) == []
    again = only(c.tick(2_500), Produce)
    assert again.event.claim_id != claim.event.claim_id
    grant = ev.Grant("acme/pay/k1", 1, again.event.claim_id, 13_000, 2_600)
    c.produced(again.job_id, True, 2_600)
    only(c.record(rec(grant, 2), 2_700), Call)  # now on the grant path


def test_a_failing_lookup_is_retried_within_the_patience_then_unqueryable():
    c = core()
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    assert c.looked_up(lookup.job_id, LookupAnswer(unavailable="down"), 1_100) == []
    retry = only(c.tick(c.next_wake_ms()), Lookup)
    while True:
        out = c.looked_up(retry.job_id, LookupAnswer(unavailable="down"), c.next_wake_ms()
                          or 7_000)
        if out:
            break
        retry = only(c.tick(c.next_wake_ms()), Lookup)
    result = only(out, Produce)
    assert result.event.status is ev.ReconcileStatus.UNQUERYABLE


def test_shutdown_withdraws_waiting_claims_and_lets_calls_finish_and_commit():
    c = core()
    calling = claimed(c, dispatch("acme/pay/a"), 0)
    c.produced(calling.job_id, True, 1_001)
    call = only(c.record(rec(ev.Grant("acme/pay/a", 1, calling.event.claim_id, 11_000, 1), 1),
                         1_002), Call)
    waiting = claimed(c, dispatch("acme/pay/b"), 2)
    c.produced(waiting.job_id, True, 1_003)
    withdrawal = only(c.shutdown(1_004), Produce)
    assert withdrawal.event.claim_id == waiting.event.claim_id
    assert withdrawal.event.status is OS.NOT_CALLED
    report = only(c.called(call.job_id, OS.SUCCEEDED, "p", "", 1_100), Produce)
    c.produced(withdrawal.job_id, True, 1_150)
    assert any(isinstance(x, Commit) for x in c.produced(report.job_id, True, 1_200))


def test_options_refuse_a_lease_that_cannot_cover_call_report_and_skew():
    with pytest.raises(ValueError, match="must cover"):
        ConnectorOptions(lease_ms=3_000, call_timeout_s=2, record_margin_s=1,
                         clock_skew_ms=500).check(False)
    with pytest.raises(ValueError, match="deduplicates"):
        ConnectorOptions(fast_path=True).check(False)
    with pytest.raises(ValueError, match="at most 86400000 ms"):  # the processor refuses it
        ConnectorOptions(lease_ms=86_400_001).check(False)


def _opts() -> dict:
    return {name: getattr(OPTS, name) for name in OPTS.__slots__}


def test_revocation_gives_up_every_waiting_claim_of_the_partition_and_drops_its_queue():
    c = core(ConnectorOptions(**{**_opts(), "max_in_flight": 3}))
    first = claimed(c, dispatch("acme/pay/a"), 0)
    second = claimed(c, dispatch("acme/pay/b"), 1)
    c.produced(first.job_id, True, 1_001)
    c.produced(second.job_id, True, 1_002)
    queued = dispatch("acme/pay/a", 2)  # behind attempt 1 of the same key
    assert c.record(rec(queued, 2), 1_003) == []
    withdrawals = [x for x in c.revoked([0], 2_000) if isinstance(x, Produce)]
    assert sorted(w.event.claim_id for w in withdrawals) == sorted(
        [first.event.claim_id, second.event.claim_id])
    assert all(w.event.at_ms == 2_000 for w in withdrawals)
    for w in withdrawals:
        assert c.produced(w.job_id, True, 2_001) == []  # nothing more to start or commit
    assert c.idle()
    assert c.record(rec(dispatch("acme/pay/z"), 3), 2_100) == []  # partition 0 is gone


def test_a_claim_still_unanswered_is_logged_once(caplog):
    c = core(ConnectorOptions(**{**_opts(), "answer_warn_s": 10.0}))
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    with caplog.at_level("WARNING", logger="ledger_stream.connector.core"):
        c.tick(10_999)
        assert not caplog.records
        c.tick(11_001)
        c.tick(20_000)
    assert [r.getMessage() for r in caplog.records] == [
        "claim not answered yet; still waiting for the same claim"]
    assert caplog.records[0].fields["claim_id"] == claim.event.claim_id


def test_a_revoked_lookup_that_failed_is_dropped_not_reported_unqueryable():
    c = core()
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    assert c.revoked([0], 1_050) == []  # the lookup is on the wire: it finishes
    assert c.looked_up(lookup.job_id, LookupAnswer(unavailable="down"), 1_100) == []
    assert c.idle()


def test_a_found_effect_is_reported_with_the_reconcile_it_answers():
    c = core(deduplicates=True)
    reconcile = ev.Reconcile("acme/pay/k1", 2, "c9", "t", 1)
    lookup = only(c.record(rec(reconcile, 0), 1_000), Lookup)
    result = only(c.looked_up(lookup.job_id, LookupAnswer("pay-7"), 1_100), Produce).event
    assert (result.key, result.attempt, result.claim_id, result.status, result.external_id,
            result.target_deduplicates, result.at_ms) == (
        "acme/pay/k1", 2, "c9", ev.ReconcileStatus.FOUND, "pay-7", True, 1_100)


def test_a_withdrawal_says_why_and_nothing_is_left_in_flight():
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    withdrawal = only(c.revoked([0], 2_000), Produce).event
    assert withdrawal.error == "claim withdrawn: partition revoked or stopping"
    assert (withdrawal.key, withdrawal.attempt, withdrawal.at_ms) == ("acme/pay/k1", 1, 2_000)
    assert c.in_flight() == 1  # the withdrawal is on the wire until acknowledged


def test_jobs_leave_no_trace_once_finished():
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    call = only(c.record(rec(ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1), 1),
                         1_020), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "p", "", 1_100), Produce)
    c.produced(report.job_id, True, 1_200)
    assert c.in_flight() == 0 and c.idle()
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k2", 1, "x", "t", 1), 2), 1_300), Lookup)
    result = only(c.looked_up(lookup.job_id, LookupAnswer(None), 1_400), Produce)
    c.produced(result.job_id, True, 1_500)
    assert c.in_flight() == 0 and c.idle()


def test_a_claim_given_up_while_recording_never_calls_on_a_later_grant():
    c = core()
    claim = claimed(c, dispatch())
    assert c.revoked([0], 1_005) == []  # the claim is not acknowledged yet
    withdrawal = only(c.produced(claim.job_id, True, 1_010), Produce)
    assert withdrawal.event.status is OS.NOT_CALLED
    c.assigned(0)  # the partition comes back
    grant = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_011)
    assert not [x for x in c.record(rec(grant, 5), 1_020) if isinstance(x, Call)]


def test_an_unsuccessful_call_is_logged_with_its_ids_and_error(caplog):
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    call = only(c.record(rec(ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1), 1),
                         1_020), Call)
    with caplog.at_level("WARNING", logger="ledger_stream.connector.core"):
        c.called(call.job_id, OS.UNKNOWN, "", "ReadTimeout after sending", 1_100)
        c2 = core()
        ok = claimed(c2, dispatch())
        c2.produced(ok.job_id, True, 1)
        call2 = only(c2.record(rec(ev.Grant("acme/pay/k1", 1, ok.event.claim_id, 11_000, 1),
                                   1), 2), Call)
        c2.called(call2.job_id, OS.SUCCEEDED, "p", "", 3)
    (record,) = caplog.records  # the success is not a warning
    assert record.getMessage() == "attempt outcome"
    assert record.fields == {"key": "acme/pay/k1", "attempt": 1,
                             "claim_id": claim.event.claim_id, "outcome": "unknown",
                             "error": "ReadTimeout after sending"}


def test_a_failed_ack_stops_with_the_reason():
    c = core()
    claim = claimed(c, dispatch())
    (stop,) = c.produced(claim.job_id, False, 1_010, "AttemptClaim: Message size too large")
    assert stop == Stop("an acknowledgement failed: AttemptClaim: Message size too large")
    assert c.stopped == stop.reason


def test_lookups_back_off_doubling_up_to_five_seconds_within_the_patience():
    c = core(ConnectorOptions(**{**_opts(), "lookup_patience_s": 30.0}))
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    assert (lookup.key, lookup.timeout_s) == ("acme/pay/k1", 2.0)
    waits, now = [], 1_000
    for _ in range(7):
        assert c.looked_up(lookup.job_id, LookupAnswer(unavailable="down"), now) == []
        wake = c.next_wake_ms()
        waits.append(wake - now)
        now = wake
        lookup = only(c.tick(now), Lookup)
    assert waits == [200, 400, 800, 1_600, 3_200, 5_000, 5_000]


def test_the_patience_ends_exactly_at_its_deadline():
    c = core(ConnectorOptions(**{**_opts(), "lookup_patience_s": 0.2}))
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    assert c.looked_up(lookup.job_id, LookupAnswer(unavailable="down"), 1_000) == []
    retry = only(c.tick(1_200), Lookup)
    result = only(c.looked_up(retry.job_id, LookupAnswer(unavailable="down"), 1_200), Produce)
    assert (result.event.status, result.event.error, result.event.external_id) == (
        ev.ReconcileStatus.UNQUERYABLE, "down", "")


def test_a_lookup_waits_for_the_targets_consistency_window():
    c = core(ConnectorOptions(**{**_opts(), "lookup_delay_s": 1.5}))
    assert c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000) == []
    assert c.next_wake_ms() == 2_500
    assert c.tick(2_499) == []
    only(c.tick(2_500), Lookup)


def test_a_target_without_lookup_is_unqueryable_at_once():
    c = core(queryable=False)
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    result = only(c.looked_up(lookup.job_id, LookupAnswer(unavailable="no lookup"), 1_001),
                  Produce).event
    assert (result.status, result.error) == (ev.ReconcileStatus.UNQUERYABLE, "no lookup")


def test_not_found_is_reported_with_empty_ids():
    c = core()
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    result = only(c.looked_up(lookup.job_id, LookupAnswer(None), 1_100), Produce).event
    assert (result.status, result.external_id, result.error, result.at_ms) == (
        ev.ReconcileStatus.NOT_FOUND, "", "", 1_100)


@pytest.mark.parametrize("age_ms,fast", [(60_000, True), (60_001, False)])
def test_the_fast_path_age_limit_is_inclusive(age_ms, fast):
    c = core(ConnectorOptions(**{**_opts(), "fast_path": True}), deduplicates=True)
    claim = only(c.record(rec(dispatch(), 0, ts=100_000 - age_ms), 100_000), Produce)
    assert bool([x for x in c.produced(claim.job_id, True, 100_001)
                 if isinstance(x, Call)]) is fast


def test_a_dispatch_waits_for_its_not_before():
    c = core()
    assert c.record(rec(dispatch(not_before=5_000), 0), 1_000) == []
    assert c.next_wake_ms() == 5_000
    assert c.tick(4_999) == []
    only(c.tick(5_000), Produce)


def test_keys_of_a_revoked_partition_do_not_block_the_others():
    c = core(ConnectorOptions(**{**_opts(), "max_in_flight": 1}))
    first = claimed(c, dispatch("acme/pay/a"), 0, partition=0)
    c.produced(first.job_id, True, 1_001)
    assert c.record(rec(dispatch("acme/pay/b"), 1, partition=0), 1_002) == []  # queued
    assert c.record(rec(dispatch("acme/pay/c"), 0, partition=1), 1_003) == []  # queued
    out = c.revoked([0], 1_004)  # a and b go; c may start
    assert any(isinstance(x, Produce) and x.event.key == "acme/pay/a" for x in out)
    withdrawal = next(x for x in out if isinstance(x, Produce))
    started = c.produced(withdrawal.job_id, True, 1_005)
    assert [x.event.key for x in started if isinstance(x, Produce)] == ["acme/pay/c"]


def test_the_remembered_ids_forget_the_oldest_first():
    from ledger_stream.connector.progress import Remembered

    seen = Remembered(limit=2)
    for item in ("a", "b", "c"):
        seen.add(item)
    assert "a" not in seen and "b" in seen and "c" in seen


def test_offsets_already_read_are_not_read_again():
    from ledger_stream.connector.progress import PartitionProgress

    progress = PartitionProgress()
    assert progress.read(0) and not progress.read(0) and progress.read(1)
    assert progress.finish(1) is None and progress.finish(0) == 2


# --- from the second mutation run's survivors ---------------------------------------------


def _fast_core(**changes) -> ConnectorCore:
    return core(ConnectorOptions(**{**_opts(), "fast_path": True, **changes}),
                deduplicates=True)


def test_a_call_carries_the_dispatchs_request_and_the_call_timeout():
    from ledger_stream.connector.target import EffectRequest

    c = core()
    d = ev.Dispatch("d-k1-2", "acme/pay/k1", 2, "i1", "acme", "pay", "t",
                    canonical_json(ARGS), args_hash(ARGS), canonical_json({"memo": "rent"}),
                    0, 0)
    claim = claimed(c, d)
    assert claim.event.attempt == 2
    c.produced(claim.job_id, True, 1_010)
    grant = ev.Grant("acme/pay/k1", 2, claim.event.claim_id, 11_000, 1_020)
    call = only(c.record(rec(grant, 1), 1_030), Call)
    request = EffectRequest("acme/pay/k1", 2, claim.event.claim_id, "pay", {"amount": 10},
                            args_hash(ARGS), {"memo": "rent"})
    assert call == Call(claim.job_id, request, 2.0, 11_000 - 500 - 3_000)


def test_a_fast_path_call_has_no_start_deadline():
    c = _fast_core()
    claim = only(c.record(rec(dispatch(), 0, ts=1_000), 1_000), Produce)
    call = only(c.produced(claim.job_id, True, 1_010), Call)
    assert call.start_by_ms == 0
    assert call.request.attempt_id == claim.event.claim_id


def test_a_grant_with_exactly_enough_lease_left_is_called():
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    grant = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_020)
    # 11_000 - 7_500 - 500 ms of skew = 3_000 ms left: the 2 s call and 1 s record margin
    call = only(c.record(rec(grant, 1), 7_500), Call)
    assert call.start_by_ms == 7_500


def test_a_held_whose_lease_already_ended_claims_again_at_the_next_millisecond():
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    held = ev.Held("acme/pay/k1", 1, claim.event.claim_id, 1_000, 1_020)  # lease long over
    assert c.record(rec(held, 1), 5_000) == []
    assert c.next_wake_ms() == 5_001
    assert c.tick(5_000) == []
    only(c.tick(5_001), Produce)


@pytest.mark.parametrize("deduplicates", [True, False])
def test_every_outcome_declares_whether_the_target_deduplicates(deduplicates):
    c = core(deduplicates=deduplicates)
    claim = claimed(c, dispatch("acme/pay/a"), 0)
    c.produced(claim.job_id, True, 1_010)
    grant = ev.Grant("acme/pay/a", 1, claim.event.claim_id, 11_000, 1_020)
    call = only(c.record(rec(grant, 1), 1_030), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_100), Produce).event
    assert report.target_deduplicates is deduplicates
    other = claimed(c, dispatch("acme/pay/b"), 2, now=1_200)
    c.produced(other.job_id, True, 1_210)
    withdrawal = only(c.shutdown(1_300), Produce).event
    assert withdrawal.target_deduplicates is deduplicates


def test_a_withdrawal_names_no_receipt():
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    withdrawal = only(c.revoked([0], 2_000), Produce).event
    assert (withdrawal.status, withdrawal.external_id) == (OS.NOT_CALLED, "")


def test_errors_are_cut_to_200_characters_in_outcomes_and_lookup_results():
    c = core(queryable=False)
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    grant = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_020)
    call = only(c.record(rec(grant, 1), 1_030), Call)
    long_error = "e" * 150 + "f" * 150
    report = only(c.called(call.job_id, OS.UNKNOWN, "", long_error, 1_100), Produce).event
    assert report.error == long_error[:200]
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k2", 1, "x", "t", 1), 2), 1_200), Lookup)
    result = only(c.looked_up(lookup.job_id, LookupAnswer(unavailable=long_error), 1_300),
                  Produce).event
    assert result.error == long_error[:200]


def test_a_core_with_work_in_flight_is_not_idle():
    c = core()
    assert c.idle()
    claim = claimed(c, dispatch())
    assert not c.idle()  # one job running, nothing queued
    c.produced(claim.job_id, True, 1_010)
    assert not c.idle()


def test_only_claims_waiting_for_their_answer_are_reported_as_slow(caplog):
    c = core()
    calling = claimed(c, dispatch("acme/pay/a"), 0)
    c.produced(calling.job_id, True, 1_001)
    only(c.record(rec(ev.Grant("acme/pay/a", 1, calling.event.claim_id, 11_000, 1), 1), 1_002),
         Call)  # its call runs long
    assert c.record(rec(dispatch("acme/pay/b", not_before=90_000), 2), 1_003) == []
    claiming = claimed(c, dispatch("acme/pay/c"), 3)  # its acknowledgement is slow
    with caplog.at_level("WARNING", logger="ledger_stream.connector.core"):
        assert c.tick(60_000) == []
    assert not caplog.records
    assert claiming.event.key == "acme/pay/c"


def test_the_unanswered_claim_warning_comes_once_answer_warn_s_has_passed(caplog):
    c = core(ConnectorOptions(**{**_opts(), "answer_warn_s": 10.0}))
    claim = claimed(c, dispatch(attempt=3))
    c.produced(claim.job_id, True, 1_010)
    with caplog.at_level("WARNING", logger="ledger_stream.connector.core"):
        c.tick(11_000)  # exactly 10 s after the claim: not yet
        assert not caplog.records
        c.tick(11_001)
    (record,) = caplog.records
    assert record.fields == {"key": "acme/pay/k1", "attempt": 3,
                             "claim_id": claim.event.claim_id}


def test_a_lookup_result_is_committed_once_it_is_recorded():
    c = core()
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    result = only(c.looked_up(lookup.job_id, LookupAnswer(None), 1_100), Produce)
    assert c.produced(result.job_id, True, 1_200) == [Commit(0, 1)]


def test_a_copy_of_a_handled_dispatch_is_committed_without_a_new_claim():
    c = core()
    _handled(c, "acme/pay/k1", 0, 0, 1_000)
    assert c.record(rec(dispatch(), 2), 1_030) == [Commit(0, 3)]  # a replay's copy


def test_a_copy_read_after_a_done_is_claimed_again():
    """Done answers the attempt as it was when the claim was decided. At least once, a new
    owner can decide a claim (Done: no such key yet) before the intent its first copy came
    from, then send the same dispatch again: that copy must be claimed, or the key waits
    for good (the at-least-once chaos soak)."""
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    done = c.record(rec(ev.Done("acme/pay/k1", 1, claim.event.claim_id, 1), 1), 1_020)
    assert done[-1] == Commit(0, 2)
    again = claimed(c, dispatch(), offset=2, now=1_030)
    assert again.event.claim_id != claim.event.claim_id
    c.produced(again.job_id, True, 1_040)
    grant = ev.Grant("acme/pay/k1", 1, again.event.claim_id, 11_000, 1_050)
    assert isinstance(only(c.record(rec(grant, 3), 1_060), Call), Call)


def test_a_fast_path_copy_read_after_a_done_is_claimed_again():
    """The same on the fast path: its call went out before the answer, and a Done leaves
    the key's effect unrecorded (at least once, its claim and outcome decided before the
    intent); the copy sent once the attempt is open must be claimed, not skipped."""
    c = _fast_core()
    claim = only(c.record(rec(dispatch(), 0, ts=1_000), 1_000), Produce)
    call = only(c.produced(claim.job_id, True, 1_010), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_100), Produce)
    c.produced(report.job_id, True, 1_200)
    done = c.record(rec(ev.Done("acme/pay/k1", 1, claim.event.claim_id, 1), 1), 1_300)
    assert done[-1] == Commit(0, 2)
    again = only(c.record(rec(dispatch(), 2, ts=1_400), 1_400), Produce)
    assert isinstance(again.event, ev.AttemptClaim)
    assert again.event.claim_id != claim.event.claim_id


def _handled(c: ConnectorCore, key: str, partition: int, offset: int, now: int) -> None:
    """Claim attempt 1 of ``key`` (its dispatch at ``offset``), get the grant (``offset+1``),
    call, report success and have the report acknowledged."""
    claim = claimed(c, dispatch(key), offset, partition, now)
    c.produced(claim.job_id, True, now + 1)
    grant = ev.Grant(key, 1, claim.event.claim_id, now + 10_000, now + 2)
    call = only(c.record(rec(grant, offset + 1, partition), now + 3), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", now + 4), Produce)
    c.produced(report.job_id, True, now + 5)


def test_copies_of_handled_dispatches_queued_together_are_all_committed_and_work_goes_on():
    c = core(ConnectorOptions(**{**_opts(), "max_in_flight": 1}))
    _handled(c, "acme/pay/a", 0, 0, 1_000)
    _handled(c, "acme/pay/b", 1, 0, 1_100)
    busy = claimed(c, dispatch("acme/pay/x"), 2, 0, 1_200)
    c.produced(busy.job_id, True, 1_201)
    assert c.record(rec(dispatch("acme/pay/b"), 2, 1), 1_210) == []  # queued copies
    assert c.record(rec(dispatch("acme/pay/a"), 3, 0), 1_220) == []
    assert c.record(rec(dispatch("acme/pay/k"), 3, 1), 1_230) == []  # queued new work
    out = c.record(rec(ev.Done("acme/pay/x", 1, busy.event.claim_id, 1), 4, 0), 1_240)
    assert Commit(1, 3) in out  # b's copy; k (offset 3) is not handled yet
    assert Commit(0, 5) in out  # x, a's copy and the Done itself
    assert [x.event.key for x in out if isinstance(x, Produce)] == ["acme/pay/k"]


def test_a_key_queued_behind_its_own_running_job_does_not_jump_ahead_of_waiting_keys():
    c = core(ConnectorOptions(**{**_opts(), "max_in_flight": 1}))
    first = claimed(c, dispatch("acme/pay/x"), 0)
    c.produced(first.job_id, True, 1_001)
    assert c.record(rec(dispatch("acme/pay/x", 2), 1), 1_002) == []  # behind x's attempt 1
    assert c.record(rec(dispatch("acme/pay/b"), 2), 1_003) == []  # waits for a free slot
    out = c.record(rec(ev.Done("acme/pay/x", 1, first.event.claim_id, 1), 3), 1_004)
    assert [x.event.key for x in out if isinstance(x, Produce)] == ["acme/pay/b"]


def test_revocation_withdraws_answered_claims_drops_unclaimed_ones_and_starts_queued_work():
    c = core(ConnectorOptions(**{**_opts(), "max_in_flight": 2}))
    answered = claimed(c, dispatch("acme/pay/a"), 0)
    c.produced(answered.job_id, True, 1_001)
    assert c.record(rec(dispatch("acme/pay/b", not_before=50_000), 1), 1_002) == []
    assert c.record(rec(dispatch("acme/pay/c"), 0, partition=1), 1_003) == []  # no slot
    out = c.revoked([0], 2_000)
    produced = [x.event for x in out if isinstance(x, Produce)]
    assert [(e.key, type(e)) for e in produced] == [("acme/pay/a", ev.AttemptOutcome),
                                                    ("acme/pay/c", ev.AttemptClaim)]
    assert produced[0].claim_id == answered.event.claim_id
    assert produced[1].at_ms == 2_000
    assert c.in_flight() == 2  # a's withdrawal and c's claim; b left no job behind


def test_revoking_a_fast_path_call_still_awaiting_its_answer_lets_queued_work_start():
    c = _fast_core(max_in_flight=2)
    backlog = only(c.record(rec(dispatch("acme/pay/a"), 0, ts=1_000, backlog=True), 1_000),
                   Produce)
    assert c.produced(backlog.job_id, True, 1_001) == []  # waits for its grant
    live = only(c.record(rec(dispatch("acme/pay/b"), 1, ts=1_002), 1_002), Produce)
    call = only(c.produced(live.job_id, True, 1_003), Call)
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-b", "", 1_004), Produce)
    assert c.produced(report.job_id, True, 1_005) == []  # recorded; its answer not read yet
    assert c.record(rec(dispatch("acme/pay/c"), 0, partition=1, ts=1_006), 1_006) == []
    out = c.revoked([0], 5_000)
    produced = [x.event for x in out if isinstance(x, Produce)]
    assert [(e.key, type(e)) for e in produced] == [("acme/pay/a", ev.AttemptOutcome),
                                                    ("acme/pay/c", ev.AttemptClaim)]
    withdrawal, started = produced
    assert isinstance(withdrawal, ev.AttemptOutcome) and withdrawal.status is OS.NOT_CALLED
    assert started.at_ms == 5_000
    assert not [x for x in out if isinstance(x, Commit)]


def test_a_fast_path_call_revoked_while_running_frees_its_slot_when_recorded():
    c = _fast_core(max_in_flight=1)
    claim = only(c.record(rec(dispatch("acme/pay/a"), 0, ts=1_000), 1_000), Produce)
    call = only(c.produced(claim.job_id, True, 1_001), Call)
    assert c.record(rec(dispatch("acme/pay/c"), 0, partition=1, ts=1_002), 1_002) == []
    assert c.revoked([0], 1_003) == []  # the call is on the wire: it finishes
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-a", "", 1_004), Produce)
    out = c.produced(report.job_id, True, 3_000)
    started = only(out, Produce).event
    assert (started.key, started.at_ms) == ("acme/pay/c", 3_000)
    assert not [x for x in out if isinstance(x, Commit)]


def test_a_revoked_lookup_that_failed_frees_its_slot_for_queued_work():
    c = core(ConnectorOptions(**{**_opts(), "max_in_flight": 1}))
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    assert c.record(rec(dispatch("acme/pay/c"), 0, partition=1), 1_010) == []
    assert c.revoked([0], 1_050) == []
    started = only(c.looked_up(lookup.job_id, LookupAnswer(unavailable="down"), 1_100),
                   Produce).event
    assert (started.key, started.at_ms) == ("acme/pay/c", 1_100)
    assert c.in_flight() == 1


def test_a_claim_answered_before_its_ack_then_revoked_is_withdrawn_when_recorded():
    c = core()
    claim = claimed(c, dispatch())
    grant = ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1_005)
    assert c.record(rec(grant, 1), 1_006) == []  # read before the claim's acknowledgement
    assert c.revoked([0], 1_007) == []
    withdrawal = only(c.produced(claim.job_id, True, 1_010), Produce).event
    assert (withdrawal.status, withdrawal.claim_id, withdrawal.error) == (
        OS.NOT_CALLED, claim.event.claim_id, "claim withdrawn: partition revoked or stopping")


def test_given_up_claims_leave_nothing_waiting_for_an_answer():
    """A leak with no other symptom: the claim ids still awaited (private, read directly)."""
    c = core()
    recording = claimed(c, dispatch("acme/pay/a"))
    assert c.revoked([0], 1_005) == []  # the claim is not acknowledged yet
    withdrawal = only(c.produced(recording.job_id, True, 1_010), Produce)
    c.produced(withdrawal.job_id, True, 1_020)
    assert c._waiting == {}
    f = _fast_core()
    claim = only(f.record(rec(dispatch("acme/pay/b"), 0, ts=1_000), 1_000), Produce)
    call = only(f.produced(claim.job_id, True, 1_001), Call)
    f.revoked([0], 1_002)
    report = only(f.called(call.job_id, OS.SUCCEEDED, "pay-b", "", 1_003), Produce)
    f.produced(report.job_id, True, 1_004)
    assert f._waiting == {} and f.in_flight() == 0


@pytest.mark.parametrize("failed_at,reported", [(1_800, False), (1_801, True)])
def test_a_lookup_is_retried_only_while_the_retry_fits_in_the_patience(failed_at, reported):
    c = core(ConnectorOptions(**{**_opts(), "lookup_patience_s": 1.0}))
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    # the first retry waits 200 ms; the patience ends at 2_000
    out = c.looked_up(lookup.job_id, LookupAnswer(unavailable="down"), failed_at)
    assert bool(out) is reported
    if reported:
        assert only(out, Produce).event.status is ev.ReconcileStatus.UNQUERYABLE


def test_options_accept_a_lease_that_exactly_covers_call_report_and_skew():
    ConnectorOptions(lease_ms=3_500, call_timeout_s=2, record_margin_s=1,
                     clock_skew_ms=500).check(False)
    with pytest.raises(ValueError, match="must cover"):
        ConnectorOptions(lease_ms=3_499, call_timeout_s=2, record_margin_s=1,
                         clock_skew_ms=500).check(False)


def test_options_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"^the fast path needs a target that deduplicates "
                                         r"by key$"):
        ConnectorOptions(fast_path=True).check(False)
    with pytest.raises(ValueError, match=r"^max_in_flight must be at least 1$"):
        ConnectorOptions(max_in_flight=0).check(False)


def test_a_call_in_flight_when_its_partition_is_revoked_is_reported_and_never_committed():
    c = core()
    claim = claimed(c, dispatch())
    c.produced(claim.job_id, True, 1_010)
    call = only(c.record(rec(ev.Grant("acme/pay/k1", 1, claim.event.claim_id, 11_000, 1), 1),
                         1_020), Call)
    assert c.revoked([0], 1_030) == []  # the call is on the wire: it finishes
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_100), Produce)
    assert report.event.status is OS.SUCCEEDED
    assert c.produced(report.job_id, True, 1_200) == []  # no commit for a revoked partition
    assert c.in_flight() == 0 and c.idle()


def test_a_found_result_carries_no_error():
    c = core()
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    result = only(c.looked_up(lookup.job_id, LookupAnswer("pay-7"), 1_100), Produce).event
    assert (result.status, result.external_id, result.error) == (
        ev.ReconcileStatus.FOUND, "pay-7", "")


# --- after a failed acknowledgement, and while stopping (found by a review, 2026-12-05) --------


def test_no_target_call_after_an_acknowledgement_failed():
    c = core()
    a = claimed(c, dispatch("acme/pay/a"), offset=0)
    b = claimed(c, dispatch("acme/pay/b"), offset=1)
    # B's grant is read before B's claim acknowledgement is served (the loop polls first)...
    grant = ev.Grant("acme/pay/b", 1, b.event.claim_id, 11_000, 1_010)
    assert c.record(rec(grant, 2), 1_010) == []
    # ...then, in one pass over the completions, A's acknowledgement fails and B's succeeds.
    assert only(c.produced(a.job_id, False, 1_020, "broker down"), Stop)
    assert not any(isinstance(x, Call) for x in c.produced(b.job_id, True, 1_021))
    # B is dropped, not left half-answered: the revocation of the consumer's close (the
    # simulation found a KeyError here) gives up what is left, and nothing goes out.
    assert not any(isinstance(x, Call | Lookup) for x in c.revoked([0, 1], 1_030))
    assert c.in_flight() == 1  # A: its claim's acknowledgement failed, the process exits


def test_no_grant_read_after_an_acknowledgement_failed_calls():
    c = core()
    a = claimed(c, dispatch("acme/pay/a"), offset=0)
    b = claimed(c, dispatch("acme/pay/b"), offset=1)
    assert c.produced(b.job_id, True, 1_005) == []
    assert only(c.produced(a.job_id, False, 1_020, "broker down"), Stop)
    grant = ev.Grant("acme/pay/b", 1, b.event.claim_id, 11_000, 1_010)
    assert not any(isinstance(x, Call) for x in c.record(rec(grant, 2), 1_030))


def test_no_new_claim_or_lookup_after_an_acknowledgement_failed():
    c = core()
    a = claimed(c, dispatch("acme/pay/a"), offset=0)
    assert c.record(rec(dispatch("acme/pay/b", not_before=5_000), 1), 1_000) == []
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/c", 1, "x", "t", 1), 2), 1_000), Lookup)
    assert c.looked_up(lookup.job_id, LookupAnswer(unavailable="down"), 1_100) == []
    assert only(c.produced(a.job_id, False, 1_200, "broker down"), Stop)
    assert c.tick(6_000) == []  # B's wait is over and C's retry is due: neither goes out


def _fast_call_held_meanwhile() -> tuple[ConnectorCore, Call]:
    """A fast-path call on the wire, and a Held for its claim read during it."""
    c = core(ConnectorOptions(**{**_opts(), "fast_path": True}), deduplicates=True)
    claim = only(c.record(rec(dispatch(), 0, ts=1_000), 1_000), Produce)
    call = only(c.produced(claim.job_id, True, 1_010), Call)
    held = ev.Held("acme/pay/k1", 1, claim.event.claim_id, 2_000, 1_050)
    assert c.record(rec(held, 1), 1_060) == []
    return c, call


def test_a_fast_path_call_on_the_wire_at_shutdown_ends_once_reported_uncommitted():
    c, call = _fast_call_held_meanwhile()
    assert c.shutdown(1_070) == []  # SIGTERM while the call is on the wire
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_100), Produce)
    assert report.event.status is OS.SUCCEEDED  # the effect's outcome is still recorded
    assert c.produced(report.job_id, True, 1_110) == []  # no Commit: the next owner asks
    assert c.idle()  # the drain ends now, not at its deadline
    assert c.tick(3_000) == []  # and the Held read before does not make it claim again


def test_a_failing_lookup_is_not_retried_while_stopping():
    c = core()
    lookup = only(c.record(rec(ev.Reconcile("acme/pay/k1", 1, "x", "t", 1), 0), 1_000), Lookup)
    assert c.shutdown(1_050) == []
    assert c.looked_up(lookup.job_id, LookupAnswer(unavailable="down"), 1_100) == []
    assert c.idle() and c.tick(9_000) == []


def test_a_fast_path_claim_answered_before_its_acknowledgement_follows_the_answer():
    c = core(ConnectorOptions(**{**_opts(), "fast_path": True}), deduplicates=True)
    claim = only(c.record(rec(dispatch(), 0, ts=1_000), 1_000), Produce)
    done = ev.Done("acme/pay/k1", 1, claim.event.claim_id, 1_005)
    assert c.record(rec(done, 1), 1_006) == []  # read before the claim's acknowledgement
    out = c.produced(claim.job_id, True, 1_010)
    assert not any(isinstance(x, Call) for x in out)  # the key was settled: no call
    assert c.idle()


def test_a_fast_path_call_whose_partition_went_does_not_claim_again_on_a_held():
    c, call = _fast_call_held_meanwhile()
    assert c.revoked([0], 1_070) == []
    report = only(c.called(call.job_id, OS.SUCCEEDED, "pay-1", "", 1_100), Produce)
    assert c.produced(report.job_id, True, 1_110) == []
    assert c.idle() and c.tick(3_000) == []  # the partition's new owner claims, not we


class CountedScans(dict):  # type: ignore[type-arg]
    """The core's running jobs, counting the scans over all of them."""

    scans = 0

    def values(self):  # type: ignore[no-untyped-def]
        CountedScans.scans += 1
        return super().values()


def test_tick_and_the_next_wake_look_at_the_running_jobs_only_once_one_may_be_due():
    """The runtime asks both on every pass of its loop: a scan of 256 running jobs each
    time cost about 20 µs of CPU per dispatch. A job waiting (a not_before, a Held) or an
    answer slow enough to warn about is still seen at its time."""
    c = core(ConnectorOptions(instance_id="c", lease_ms=10_000, call_timeout_s=2.0,
                              record_margin_s=1.0, clock_skew_ms=500, max_in_flight=8,
                              answer_warn_s=10.0))
    claims = [claimed(c, dispatch(f"acme/pay/k{i}"), offset=i) for i in range(4)]
    for claim in claims[:3]:
        c.produced(claim.job_id, True, 1_010)  # waiting for their answers
    assert c.record(rec(dispatch("acme/pay/late", not_before=5_000), 4), 1_020) == []
    c._busy = CountedScans(c._busy)  # type: ignore[attr-defined]
    CountedScans.scans = 0
    assert c.next_wake_ms() == 5_000  # one waits: its wake-up is looked for
    for now in range(1_100, 4_999, 50):
        assert c.tick(now) == [] and c.next_wake_ms() == 5_000
    assert CountedScans.scans <= 2
    assert isinstance(only(c.tick(5_000), Produce).event, ev.AttemptClaim)
    CountedScans.scans = 0
    assert c.next_wake_ms() is None
    for now in range(5_001, 11_000, 50):
        assert c.tick(now) == [] and c.next_wake_ms() is None
    assert CountedScans.scans <= 2  # nothing waits; no answer is slow yet
    assert c.tick(11_011) == [] and all(j.warned for j in c._busy.values()  # type: ignore
                                        if j.stage.name == "ANSWER")
