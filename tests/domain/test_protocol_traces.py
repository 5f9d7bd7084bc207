"""The counterexamples in tests/protocol_traces/, replayed on the decision core.

Each trace broke a simpler protocol; the processor's side of the rule that closes it is
asserted here (the connector's side is covered by the connector tests).
"""

from __future__ import annotations

import pytest

from ledger_stream.domain import Policy, absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import Phase
from tests.factories import KEY, claim, intent, now_of, outcome, reconciled, resolution

pytestmark = pytest.mark.timeout(30)

OS, RS, RES = ev.OutcomeStatus, ev.ReconcileStatus, ev.Resolution
POLICY = Policy(retry_backoff_ms=0, clock_skew_ms=0)
LEASE = 10_000


class Processor:
    """The processor's log for one key, with a crash that rolls state back."""

    def __init__(self) -> None:
        self.log: list[ev.InputEvent] = []
        self.state = absent(KEY)
        self.dq: list[ev.OutputEvent] = []
        self.committed = 0

    def feed(self, event: ev.InputEvent) -> list[ev.OutputEvent]:
        self.log.append(event)
        return self._apply(event)

    def _apply(self, event: ev.InputEvent) -> list[ev.OutputEvent]:
        decision = decide(self.state, event, POLICY, now_of(event))
        self.state = decision.state
        self.dq.extend(decision.outputs)
        return list(decision.outputs)

    def crash_and_replay(self) -> None:
        """State back to the last commit, the rest of the log reprocessed."""
        self.state = absent(KEY)
        for event in self.log[self.committed:]:
            self._apply(event)


def answers(outs, claim_id):
    return [o for o in outs if isinstance(o, ev.Grant | ev.Held | ev.Reconcile | ev.Done)
            and o.claim_id == claim_id]


def test_old_grant_taken_for_new_claim():
    p = Processor()
    p.feed(intent(at_ms=1_000))
    p.log.append(claim(1, "id1", 2_000, lease_ms=LEASE))  # produced, not yet processed
    p.crash_and_replay()
    dispatches = [o for o in p.dq if isinstance(o, ev.Dispatch)]
    # The replay duplicates Dispatch(1) byte for byte: the connector skips the dispatch id.
    assert len(dispatches) == 2 and dispatches[0] == dispatches[1]
    # A new claim (new claim id) for the same attempt gets its own answer, never a Grant.
    outs = p.feed(claim(1, "id2", 3_000, lease_ms=LEASE))
    assert answers(outs, "id2") == [ev.Held(KEY, 1, "id2", 12_000, 3_000)]
    grants = [o for o in p.dq if isinstance(o, ev.Grant)]
    assert {g.claim_id for g in grants} == {"id1"}


def test_stale_claim_is_answered_with_done():
    p = Processor()
    p.feed(intent(at_ms=1_000))
    p.feed(claim(1, "id1", 12_000, lease_ms=LEASE))
    p.feed(outcome(OS.NOT_APPLIED, 1, "id1", 12_001))  # lease expired: holder did not call
    outs = p.feed(claim(1, "id3", 12_002, lease_ms=LEASE))
    assert answers(outs, "id3") == [ev.Done(KEY, 1, "id3", 12_002)]
    assert p.state.attempt == 2


def test_stale_outcome_does_not_reopen_the_key():
    p = Processor()
    p.feed(intent(at_ms=1_000))
    p.feed(claim(1, "id1", 2_000, lease_ms=LEASE))
    p.feed(claim(1, "id2", 13_000, lease_ms=LEASE))  # after the lease: reconcile
    p.feed(reconciled(RS.UNQUERYABLE, 1, "id2", 13_500, dedup=False))
    p.feed(resolution(RES.NOT_APPLIED, 1, 14_000))
    p.feed(claim(2, "id3", 14_100, lease_ms=LEASE))
    late = p.feed(outcome(OS.NOT_APPLIED, 1, "id1", 14_200))  # the old holder, late
    assert late == []
    p.feed(outcome(OS.SUCCEEDED, 2, "id3", 14_300, external_id="pay-1"))
    assert p.state.phase is Phase.SUCCEEDED
    assert [o.attempt for o in p.dq if isinstance(o, ev.Dispatch)] == [1, 2]


def test_holder_outcome_after_its_lease_settles_the_reconciliation():
    p = Processor()
    p.feed(intent(at_ms=1_000))
    p.feed(claim(1, "id1", 2_000, lease_ms=LEASE))
    outs = p.feed(claim(1, "id2", 12_500, lease_ms=LEASE))  # late claim: reconcile
    assert answers(outs, "id2") == [ev.Reconcile(KEY, 1, "id2", "sandbox", 12_500)]
    p.feed(outcome(OS.SUCCEEDED, 1, "id1", 12_600, external_id="pay-1"))
    assert (p.state.phase, p.state.external_id) == (Phase.SUCCEEDED, "pay-1")
    # The reconciler's answer arrives later and agrees: no alert, no change.
    assert p.feed(reconciled(RS.FOUND, 1, "id2", 13_000, external_id="pay-1")) == []


def test_expired_holder_reports_not_applied_and_the_key_moves_on():
    p = Processor()
    p.feed(intent(at_ms=1_000))
    p.feed(claim(1, "id1", 2_000, lease_ms=LEASE))
    outs = p.feed(outcome(OS.NOT_APPLIED, 1, "id1", 12_500, ))
    assert [o.attempt for o in outs if isinstance(o, ev.Dispatch)] == [2]


def test_irreducible_frozen_holder_is_reported_as_duplicate_effect():
    p = Processor()
    p.feed(intent(at_ms=1_000))
    p.feed(claim(1, "id1", 2_000, lease_ms=LEASE))
    p.feed(claim(1, "id2", 13_000, lease_ms=LEASE))
    p.feed(reconciled(RS.UNQUERYABLE, 1, "id2", 13_100, dedup=False))
    p.feed(resolution(RES.NOT_APPLIED, 1, 13_200))
    p.feed(claim(2, "id3", 13_300, lease_ms=LEASE))
    p.feed(outcome(OS.SUCCEEDED, 2, "id3", 13_400, external_id="eff-2"))
    outs = p.feed(outcome(OS.SUCCEEDED, 1, "id1", 13_500, external_id="eff-1"))
    assert [o.kind for o in outs if isinstance(o, ev.Alert)] == [ev.AlertKind.DUPLICATE_EFFECT]
    assert p.state.external_id == "eff-2"
