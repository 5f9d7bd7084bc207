"""The knobs of the decision table. Part of the decision's input, so a replay with the same
policy gives the same decisions.

Most knobs are ledger-wide; an action may override some of them (``ActionRules``): its
replay window, its attempts, whether a lookup that found nothing retries it, whether it needs
an approval, and whether its effect can be undone. An action without rules, and every rule
left unset, takes the safe ledger-wide value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ledger_stream.domain.approval import ApprovalKeys

DAY_MS = 24 * 3600 * 1000


class LookupRetry(StrEnum):
    """What a lookup that found no effect of an unknown attempt allows."""

    NEVER = "never"  # an operator decides, whatever the target
    # A new attempt only at a target that refuses a second effect for one key (default).
    DEDUPLICATING = "deduplicating"
    # Also at a target that does not deduplicate: a lookup that missed an effect (its
    # consistency window, a call still on the wire) then duplicates it. Honoured only for
    # an action declared reversible, whose duplicate can be undone.
    ALWAYS = "always"


@dataclass(frozen=True, slots=True)
class ActionRules:
    """One action's policy. ``None``: the ledger-wide value. The defaults never allow a
    second effect a target would not refuse, nor drop an approval the ledger requires."""

    replay_window_ms: int | None = None  # never longer than the ledger-wide window
    max_attempts: int | None = None
    retry_after_lookup: LookupRetry = LookupRetry.DEDUPLICATING
    approval: bool = False  # adds to ``Policy.approval_required_actions``, never removes
    reversible: bool = False  # a duplicate of this effect can be undone

    def retries_after_lookup(self, target_deduplicates: bool) -> bool:
        """Whether a lookup that found nothing may start a new attempt."""
        if self.retry_after_lookup is LookupRetry.NEVER:
            return False
        if target_deduplicates:
            return True
        return self.retry_after_lookup is LookupRetry.ALWAYS and self.reversible


NO_RULES = ActionRules()


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
    # The pre-granted first attempt (0: off): a fresh key's Dispatch carries a lease this
    # long, granted to the one connector that fences the dispatch record and records a
    # fenced claim; other claims wait for its end. Only an exactly-once processor sets it:
    # at least once can write one Dispatch twice, and two copies of one pre-grant could be
    # fenced by two connectors.
    pregrant_lease_ms: int = 0
    # Per-action overrides, by action type.
    actions: Mapping[str, ActionRules] = field(default_factory=dict, hash=False)
    # Names this policy in the receipts whose outcome an action's rule decided (a digest of
    # the knobs, given by whoever built the policy; "" names none).
    revision: str = ""

    def rules(self, action: str) -> ActionRules:
        return self.actions.get(action, NO_RULES)

    def requires_approval(self, action: str) -> bool:
        return action in self.approval_required_actions or self.rules(action).approval

    def replay_window_for(self, action: str) -> int:
        """The action's replay window: its own when shorter, never longer than the ledger's
        (the history topics keep records for the ledger-wide window only)."""
        own = self.rules(action).replay_window_ms
        return self.replay_window_ms if own is None else min(own, self.replay_window_ms)

    def max_attempts_for(self, action: str) -> int:
        own = self.rules(action).max_attempts
        return self.max_attempts if own is None else own

    @property
    def windows_per_action(self) -> bool:
        """Whether some action seals before the ledger-wide window (restore then reads a
        terminal row's action to index its seal)."""
        return any(r.replay_window_ms is not None for r in self.actions.values())

    def cited(self, action: str) -> str:
        """``"; policy REV for ACTION"``, to end a detail an action's rule decided; "" for
        an action without rules (the ledger-wide values decided, as before rules existed)."""
        return f"; policy {self.revision} for {action}" \
            if self.revision and action in self.actions else ""


def versions_compatible(in_flight: str, incoming: str) -> bool:
    """Workflow versions are compatible when their major components are equal
    (``"2.1"`` and ``"2.4"`` are, ``"1.9"`` and ``"2.0"`` are not)."""
    return in_flight.split(".", 1)[0] == incoming.split(".", 1)[0]
