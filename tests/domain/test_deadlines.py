"""Deadlines: no key stays in flight in silence, and terminal keys are sealed on time.

A ``Timer`` is what the runtime decides when the partition clock passes a key's ``due_ms``;
a timer that comes before the deadline, or for a key that moved on, changes nothing.
"""

from __future__ import annotations

import pytest

from ledger_stream.domain import Policy, decide, due_ms
from ledger_stream.domain import events as ev
from ledger_stream.domain.deadlines import TIMER_CLAIM
from ledger_stream.domain.state import KeyState, Phase
from tests.domain.decisions import of, run
from tests.factories import KEY, claim, intent, outcome, reconciled

pytestmark = pytest.mark.timeout(30)

OS = ev.OutcomeStatus
POLICY = Policy(replay_window_ms=100_000, retry_backoff_ms=0, clock_skew_ms=1_000,
                stall_after_ms=60_000, reconcile_timeout_ms=120_000)


def fire(state: KeyState, now: int) -> tuple[KeyState, list[ev.OutputEvent]]:
    decision = decide(state, ev.Timer(state.key, now), POLICY, now)
    return decision.state, list(decision.outputs)


def granted() -> KeyState:
    state, _ = run([intent(at_ms=1_000), claim(1, "c1", 2_000, lease_ms=10_000)],
                   policy=POLICY)
    return state


def test_a_silent_holder_is_reconciled_after_its_lease_and_the_stall_margin():
    state = granted()
    due = due_ms(state, POLICY)
    assert due == 12_000 + 1_000 + 60_000
    assert fire(state, due - 1) == (state, [])
    reconciling, out = fire(state, due)
    assert reconciling.phase is Phase.RECONCILING
    assert of(out, ev.Reconcile) == [ev.Reconcile(KEY, 1, TIMER_CLAIM, "sandbox", due)]
    assert of(out, ev.Receipt)[0].status is ev.ReceiptStatus.RECONCILING


def test_a_reconciliation_with_no_answer_goes_to_an_operator_with_an_alert():
    reconciling, _ = fire(granted(), 73_000)
    due = due_ms(reconciling, POLICY)
    assert due == 73_000 + 120_000
    waiting, out = fire(reconciling, due)
    assert waiting.phase is Phase.NEEDS_OPERATOR
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.RECONCILIATION_REQUIRED]


def test_an_unclaimed_dispatch_raises_stalled_once_and_is_offered_again():
    state, (_, dispatch) = run([intent(at_ms=1_000)], policy=POLICY)
    due = due_ms(state, POLICY)
    assert due == 61_000
    stalled, out = fire(state, due)
    assert stalled.phase is Phase.RESERVED
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.STALLED]
    assert [d.dispatch_id for d in of(out, ev.Dispatch)] == [dispatch.dispatch_id]
    assert due_ms(stalled, POLICY) is None  # once per attempt
    # A claim still gets the grant: nothing was burnt.
    granted_, out2 = run([claim(1, "c1", due + 5)], stalled, POLICY)
    assert granted_.phase is Phase.DISPATCHED and of(out2, ev.Grant)


def test_a_terminal_key_is_sealed_when_its_window_ends_without_another_event():
    state, _ = run([intent(at_ms=1_000), claim(1, "c1", 2_000),
                    outcome(OS.SUCCEEDED, 1, "c1", 3_000, external_id="pay-1")], policy=POLICY)
    due = due_ms(state, POLICY)
    assert due == 3_000 + 100_000 + 1
    assert fire(state, due - 1)[0] == state
    sealed, out = fire(state, due)
    assert sealed.phase is Phase.EXPIRED and out == []
    assert (sealed.args_json, sealed.payload_json) == ("", "")
    assert due_ms(sealed, POLICY) is None


def test_a_sealed_key_keeps_its_outcome_in_the_receipt_of_a_late_intent():
    state, _ = run([intent(at_ms=1_000), claim(1, "c1", 2_000),
                    outcome(OS.SUCCEEDED, 1, "c1", 3_000, external_id="pay-1")], policy=POLICY)
    sealed, _ = fire(state, 200_000)
    _, out = run([intent(at_ms=300_000)], sealed, POLICY)
    (receipt,) = of(out, ev.Receipt)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.REJECTED,
                                                ev.Reason.EXPIRED_KEY)
    # The compacted receipts topic keeps this as the key's latest: it must still say what
    # happened to the key.
    assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED
    assert receipt.external_id == "pay-1"


def test_a_stale_timer_changes_nothing():
    state = granted()
    settled, _ = run([outcome(OS.SUCCEEDED, 1, "c1", 3_000, external_id="p")], state, POLICY)
    assert fire(settled, 73_000) == (settled, [])


@pytest.mark.parametrize("phase_events", [
    [],
    [outcome(OS.UNKNOWN, 1, "c1", 3_000)],
])
def test_every_in_flight_phase_but_the_operator_queue_has_a_deadline(phase_events):
    state, _ = run(phase_events, granted(), POLICY)
    assert state.phase.in_flight and due_ms(state, POLICY) is not None


# --- a lagging processor: deadlines wait for the ledger's own outputs --------------------

DEFAULTS = Policy()  # lease 30 s (the connector's default), skew 2 s, stall 5 min, 10 min
LAG_MS = 1_000_000  # behind by more than lease + skew + stall + reconcile timeout (932 s)


class Lagging:
    """The runtime around the pure core, behind the log by LAG_MS: each record is decided
    at its broker timestamp while its outputs leave LAG_MS later (``sent_ms``), and the
    Timers whose deadline the clock passes are decided first, as ``Batch.add`` does."""

    def __init__(self, policy: Policy = DEFAULTS) -> None:
        self.policy, self.state = policy, KeyState(key=KEY)
        self.outputs: list[ev.OutputEvent] = []

    def read(self, event: ev.InputEvent | None, at: int) -> list[ev.OutputEvent]:
        """Decide the record appended at ``at`` (None: a Tick), timers first."""
        out: list[ev.OutputEvent] = []
        due = due_ms(self.state, self.policy)
        if due is not None and due <= at:
            out += self._decide(ev.Timer(KEY, due), at)
        if event is not None:
            out += self._decide(event, at)
        return out

    def _decide(self, event: ev.InputEvent, at: int) -> list[ev.OutputEvent]:
        decision = decide(self.state, event, self.policy, at, sent_ms=at + LAG_MS)
        self.state = decision.state
        self.outputs += decision.outputs
        return list(decision.outputs)

    def backlog(self, start: int, end: int) -> None:
        """Other records of the partition, one every 10 s and one at ``end``, appended
        before any answer to what the processor sends now."""
        for at in (*range(start, end, 10_000), end):
            self.read(None, at)


def test_a_lagging_processor_waits_for_the_answer_to_a_late_grant():
    """The claim answers a Dispatch that left LAG_MS after its intent; the Grant leaves
    LAG_MS after the claim, too late to use: the holder answers ``not_called`` at once. The
    log up to then (a backlog spanning more than 932 s) must expire nothing."""
    p = Lagging()
    p.read(intent(at_ms=0), 0)
    claimed_at = LAG_MS + 100  # the connector saw the Dispatch when it left
    (grant, _) = p.read(claim(1, "c1", claimed_at, lease_ms=30_000), claimed_at)
    assert isinstance(grant, ev.Grant) and grant.lease_until_ms == claimed_at + 30_000
    p.backlog(claimed_at, claimed_at + LAG_MS)
    assert p.state.phase is Phase.DISPATCHED, p.state.status_detail
    # The holder got its Grant LAG_MS late: not called, the next attempt, nobody paged.
    answered = claimed_at + LAG_MS + 50
    p.read(outcome(OS.NOT_CALLED, 1, "c1", answered), answered)
    assert (p.state.phase, p.state.attempt) == (Phase.RESERVED, 2)
    assert of(p.outputs, ev.Alert) == [] and of(p.outputs, ev.Reconcile) == []
    assert ev.ReceiptStatus.NEEDS_RECONCILIATION not in {
        r.status for r in of(p.outputs, ev.Receipt)}


def test_a_lagging_processor_raises_no_stall_before_its_dispatch_could_be_claimed():
    p = Lagging()
    p.read(intent(at_ms=0), 0)
    p.backlog(0, LAG_MS)  # the intent's Dispatch leaves only now
    assert of(p.outputs, ev.Alert) == []
    assert p.state.phase is Phase.RESERVED


def test_a_lagging_processor_waits_for_the_result_of_a_late_reconcile():
    """The holder's outcome is unknown: the Reconcile leaves LAG_MS after it; the result
    comes from a lookup made when the Reconcile arrived."""
    p = Lagging()
    p.read(intent(at_ms=0), 0)
    p.read(claim(1, "c1", LAG_MS + 100, lease_ms=30_000), LAG_MS + 100)
    unknown_at = LAG_MS + 20_000  # the holder's call timed out within its lease
    p.read(outcome(OS.UNKNOWN, 1, "c1", unknown_at), unknown_at)
    assert p.state.phase is Phase.RECONCILING
    p.backlog(unknown_at, unknown_at + LAG_MS)
    assert p.state.phase is Phase.RECONCILING, p.state.status_detail
    found_at = unknown_at + LAG_MS + 500
    p.read(reconciled(ev.ReconcileStatus.FOUND, 1, "c1", found_at, external_id="pay-1"),
           found_at)
    assert p.state.phase is Phase.SUCCEEDED
    assert of(p.outputs, ev.Alert) == []


def test_a_lagging_processor_still_reconciles_a_holder_that_never_answers():
    """Lag moves a deadline to the time its output left, no further: a dead holder is still
    reconciled, and a reconciliation nobody answers still reaches an operator."""
    p = Lagging()
    p.read(intent(at_ms=0), 0)
    p.read(claim(1, "c1", LAG_MS + 100, lease_ms=30_000), LAG_MS + 100)
    granted_sent = LAG_MS + 100 + LAG_MS
    assert due_ms(p.state, DEFAULTS) == granted_sent + 2_000 + 300_000
    p.backlog(LAG_MS + 100, granted_sent + 302_000)
    assert p.state.phase is Phase.RECONCILING
    reconcile_sent = p.state.sent_at_ms
    assert reconcile_sent == p.state.phase_since_ms + LAG_MS
    p.backlog(granted_sent + 302_000, reconcile_sent + 600_000)
    assert p.state.phase is Phase.NEEDS_OPERATOR
    assert [a.kind for a in of(p.outputs, ev.Alert)] == [
        ev.AlertKind.RECONCILIATION_REQUIRED]


def test_a_processor_in_step_with_the_log_keeps_its_deadlines():
    """Outputs that leave at (or before) the partition time change no deadline."""
    state = granted()
    again = decide(state, claim(1, "c1", 2_500), POLICY, 2_500, sent_ms=2_500).state
    assert due_ms(again, POLICY) == due_ms(state, POLICY) == 12_000 + 1_000 + 60_000


def test_the_send_time_is_in_no_output_and_only_arms_the_awaited_phases():
    """A decision repeated after a crash, its outputs leaving at another time, yields the
    same bytes; only a Dispatch, Grant or Reconcile the key waits on moves the deadline."""
    from tests.domain.protocol_doc import ROWS
    from tests.factories import now_of, reset_ids

    for row in ROWS:
        results = []
        for sent in (0, 10**12):
            reset_ids()
            states: dict[str, KeyState] = {}
            for event in row.setup():
                key = event.key  # type: ignore[union-attr]
                states[key] = decide(states.get(key) or KeyState(key=key), event, POLICY,
                                     now_of(event), row.setup_hold).state
            event = row.then()
            key = getattr(event, "key", None)
            key = key.decode() if isinstance(key, bytes) else key or KEY
            decision = decide(states.get(key) or KeyState(key=key), event, POLICY,
                              now_of(event), row.hold, sent)
            results.append(decision)
        plain, late = results
        assert late.outputs == plain.outputs, row.event
        awaited = {Phase.RESERVED: ev.Dispatch, Phase.DISPATCHED: ev.Grant,
                   Phase.RECONCILING: ev.Reconcile}.get(late.state.phase)
        sends = awaited is not None and any(isinstance(o, awaited) for o in late.outputs)
        if sends and due_ms(late.state, POLICY) is not None:
            # Moved as far as the lag credit allows (a send time far ahead is capped).
            assert due_ms(late.state, POLICY) >= now_of(event) + POLICY.lag_credit_ms, \
                row.event
        else:
            assert due_ms(late.state, POLICY) == due_ms(plain.state, POLICY), row.event


def test_a_processor_clock_far_ahead_delays_no_deadline_past_the_lag_credit():
    """A processor whose wall clock runs a year ahead of the broker's (a bad NTP setup)
    must not push a dead holder's reconciliation, or an unanswered reconciliation's
    operator alert, a year out: the send time counts only up to ``lag_credit_ms`` past the
    partition clock."""
    year = 365 * 24 * 3_600_000
    state = KeyState(key=KEY)
    for event, at in ((intent(at_ms=0), 0), (claim(1, "c1", 100, lease_ms=30_000), 100)):
        state = decide(state, event, DEFAULTS, at, sent_ms=at + year).state
    assert state.phase is Phase.DISPATCHED
    due = due_ms(state, DEFAULTS)
    assert due is not None and due <= 100 + DEFAULTS.lag_credit_ms + 2_000 + 300_000
    state = decide(state, ev.Timer(KEY, due), DEFAULTS, due, sent_ms=due + year).state
    assert state.phase is Phase.RECONCILING
    due = due_ms(state, DEFAULTS)
    assert due is not None and due <= state.phase_since_ms + DEFAULTS.lag_credit_ms + 600_000
    state = decide(state, ev.Timer(KEY, due), DEFAULTS, due, sent_ms=due + year).state
    assert state.phase is Phase.NEEDS_OPERATOR


def test_a_lookup_finding_an_earlier_attempt_while_the_next_is_granted_alerts():
    """A target that does not deduplicate: the operator said attempt 1 did not apply,
    attempt 2 is granted; a Reconcile for attempt 1 decided again after a replay is looked
    up again and finds an effect. The lookup cannot say whose effect it found (attempt 2's
    own, or attempt 1's with attempt 2 paying again): the key settles, nothing is resent,
    and an operator is asked to look (never silence, never a duplicate alert that may be
    false: simulate seed 15340 found the holder's own effect)."""
    state = KeyState(key=KEY)
    for event, at in ((intent(at_ms=0), 0), (claim(1, "c1", 100, lease_ms=30_000), 100),
                      (outcome(OS.UNKNOWN, 1, "c1", 200), 200),
                      (reconciled(ev.ReconcileStatus.NOT_FOUND, 1, "c1", 300, dedup=False),
                       300),
                      (ev.OperatorResolution("op-1", KEY, 1, ev.Resolution.NOT_APPLIED,
                                             "alice", 400), 400),
                      (claim(2, "c2", 40_000, lease_ms=30_000), 40_000)):
        state = decide(state, event, DEFAULTS, at).state
    assert (state.phase, state.attempt) == (Phase.DISPATCHED, 2)
    found = decide(state, reconciled(ev.ReconcileStatus.FOUND, 1, "c1", 40_600, dedup=False,
                                     external_id="pay-A"), DEFAULTS, 40_600)
    assert found.state.phase is Phase.SUCCEEDED
    assert [a.kind for a in of(list(found.outputs), ev.Alert)] == [
        ev.AlertKind.RECONCILIATION_REQUIRED]
    assert not of(list(found.outputs), ev.Dispatch)
