"""The knobs of the decision table. Part of the decision's input, so a replay with the same
policy gives the same decisions."""

from __future__ import annotations

from dataclasses import dataclass

from ledger_stream.domain.approval import ApprovalKeys

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class Policy:
    replay_window_ms: int = 7 * DAY_MS
    # Who may approve: no key by default, so no approval is accepted until keys are given.
    approval_keys: ApprovalKeys = ApprovalKeys()
    approval_required_actions: frozenset[str] = frozenset()
    retry_backoff_ms: int = 1_000
    max_attempts: int = 5
    clock_skew_ms: int = 2_000
    # A granted attempt whose lease ended this long ago (plus the skew margin) without any
    # report is reconciled; a dispatch nobody claimed for this long raises ``stalled``.
    stall_after_ms: int = 5 * 60_000
    # A reconciliation with no result for this long goes to an operator, with an alert.
    reconcile_timeout_ms: int = 10 * 60_000
    # After this many grants in a row that came too late to call, raise ``stalled`` once.
    lapse_alert_after: int = 3
    # The most a deadline that waits on the ledger's own output (a Dispatch, Grant or
    # Reconcile) is moved past the partition clock for the time that output left
    # (``sent_at_ms``, the processor's wall clock): the lag forgiven. It bounds what a
    # processor clock running ahead of the broker's can delay a dead holder's
    # reconciliation or an unanswered one's operator alert; lag beyond it is an incident
    # (the clock lag metric) and expires those deadlines as before.
    lag_credit_ms: int = 60 * 60_000

    def requires_approval(self, action: str) -> bool:
        return action in self.approval_required_actions


def versions_compatible(in_flight: str, incoming: str) -> bool:
    """Workflow versions are compatible when their major components are equal
    (``"2.1"`` and ``"2.4"`` are, ``"1.9"`` and ``"2.0"`` are not)."""
    return in_flight.split(".", 1)[0] == incoming.split(".", 1)[0]
