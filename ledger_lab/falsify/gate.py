"""The release gate (docs/design.md, 'Proof layers'), computed from the matrix's results.

The gate's keys are its criteria, in the order docs/design.md lists them; the last one is
split by the target, since "ended" means something else at each: an ambiguous outcome at a
target that can be queried must be settled by the lookup (``succeeded`` or ``failed``), one
at a target that cannot be queried must end ``needs_reconciliation`` (nothing but an
operator can know whether it happened). Only the runs with the ledger count for effects,
uncorrelated requests, approval mismatches and ambiguous outcomes (a bypassed run exists to
show the duplicate); every run, bypassed ones included, must pass, since a bypassed run that
shows no duplicate means its scenario is not real.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_lab.falsify.result import RunResult

MAX_EFFECTS = "max_business_effects_per_operation_key"
ALL_PASSING = "every_scenario_passing"
UNCORRELATED = "uncorrelated_external_requests"
MISMATCHES = "approval_payload_mismatches_accepted"
AMBIGUOUS_QUERYABLE = "every_ambiguous_outcome_at_a_queryable_target_ends_succeeded_or_failed"
AMBIGUOUS_UNQUERYABLE = \
    "every_ambiguous_outcome_at_an_unqueryable_target_ends_needs_reconciliation"
GATE_KEYS = (MAX_EFFECTS, ALL_PASSING, UNCORRELATED, MISMATCHES, AMBIGUOUS_QUERYABLE,
             AMBIGUOUS_UNQUERYABLE)


def release_gate(results: Sequence[RunResult]) -> dict[str, Any]:
    ledger = [r for r in results if r.with_ledger]
    return {
        MAX_EFFECTS: max((r.max_effects for r in ledger), default=0),
        ALL_PASSING: bool(results) and all(r.passed for r in results),
        UNCORRELATED: sum(r.uncorrelated_requests for r in ledger),
        MISMATCHES: sum(r.approval_mismatches_accepted for r in ledger),
        AMBIGUOUS_QUERYABLE: all(r.ambiguous_settled() for r in ledger if r.target_queryable),
        AMBIGUOUS_UNQUERYABLE: all(r.ambiguous_settled() for r in ledger
                                   if not r.target_queryable),
    }


def gate_passed(gate: dict[str, Any]) -> bool:
    """At most one effect per key (and at least one somewhere: a matrix that paid nothing
    proves nothing), every scenario passing, nothing uncorrelated, no mismatch accepted,
    every ambiguous outcome ended as its target allows."""
    return (gate[MAX_EFFECTS] == 1 and gate[ALL_PASSING] is True and gate[UNCORRELATED] == 0
            and gate[MISMATCHES] == 0 and gate[AMBIGUOUS_QUERYABLE] is True
            and gate[AMBIGUOUS_UNQUERYABLE] is True)
