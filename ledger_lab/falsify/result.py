"""What one run of one scenario showed, as a frozen, JSON-able record."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# How an ambiguous outcome must end (the release gate): a target that can be queried is
# asked by key, so the answer settles the key; a target that cannot be queried leaves only
# an operator, so the key must wait for one, whatever the ledger guesses.
SETTLED_BY_LOOKUP = frozenset({"succeeded", "failed"})
FOR_AN_OPERATOR = "needs_reconciliation"


def ambiguous_ended_right(ambiguous: dict[str, str], queryable: bool) -> bool:
    """Every ambiguous outcome (key -> final status) ended as its target allows: settled
    by a lookup when the target can be queried, ``needs_reconciliation`` when it cannot."""
    allowed = SETTLED_BY_LOOKUP if queryable else frozenset({FOR_AN_OPERATOR})
    return all(status in allowed for status in ambiguous.values())


@dataclass(frozen=True)
class RunResult:
    """One scenario, run once with the ledger or once bypassing it.

    Everything about effects comes from the payments sandbox's own ledger (the target's
    ground truth), never from the agent's output: ``effects`` counts the sandbox's effects
    per business operation key (``acme/refund/<invoice>``; a bypassed run's per-execution
    idempotency keys are mapped back to their invoice), ``attempt_ids`` lists the
    ``X-Attempt-Id`` of every request the sandbox received for the key.
    """

    scenario: int
    label: str  # "1", "4b", "5 after_call postgres/async"
    title: str
    with_ledger: bool
    passed: bool
    why: str
    effects: dict[str, int] = field(default_factory=dict)
    attempt_ids: dict[str, list[str]] = field(default_factory=dict)
    distinct_attempt_ids: bool = True
    conflicts_rejected: bool | None = None  # None: the scenario sent no conflicting intent
    receipts: dict[str, str] = field(default_factory=dict)  # key -> final key status
    uncorrelated_requests: int = 0
    approval_mismatches_accepted: int = 0
    ambiguous: dict[str, str] = field(default_factory=dict)  # key -> final key status
    target_queryable: bool = True  # False: the run's connector has no lookup by key
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    def ambiguous_settled(self) -> bool:
        return ambiguous_ended_right(self.ambiguous, self.target_queryable)

    @property
    def max_effects(self) -> int:
        return max(self.effects.values(), default=0)

    def to_json(self) -> dict[str, Any]:
        value = asdict(self)
        value["notes"] = list(self.notes)
        return value
