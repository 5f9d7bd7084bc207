"""The falsification matrix's shape and its release gate.

The matrix itself (every scenario, failpoint and saver, with and without the ledger) runs in
`make test` beside pytest, as `ledger-stream falsify`, whose exit status is the gate's;
docs/falsification.md holds a run. These tests check what the matrix holds and how the gate
judges its results, and run the matrix's first case through the create_agent agent on
LedgerMiddleware (the matrix runs the ledger_tool agent; `ledger-stream falsify --agent
middleware` runs all of them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_lab.falsify import (
    CASES,
    GATE_KEYS,
    MIDDLEWARE_CASES,
    RunResult,
    gate_passed,
    release_gate,
    run_case,
    select,
    table,
)
from ledger_lab.falsify.gate import AMBIGUOUS_QUERYABLE, AMBIGUOUS_UNQUERYABLE
from ledger_lab.falsify.scenarios.failpoints import FAILPOINTS
from ledger_stream.config import Settings

QUICK = select(quick=True)
QUICK_MIDDLEWARE = select(quick=True, agent="middleware")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("case", QUICK_MIDDLEWARE, ids=[c.label for c in QUICK_MIDDLEWARE])
def test_middleware_case(case, ledger_settings: Settings, tmp_path: Path):
    results = run_case(case, ledger_settings, tmp_path)
    assert [r.with_ledger for r in results] == [True, False], table(results)
    for result in results:
        assert result.passed, table(results)
    assert results[0].max_effects == 1 and results[0].uncorrelated_requests == 0, \
        table(results)
    assert results[1].why.startswith("without the ledger"), table(results)

def test_the_matrix_covers_every_scenario_and_failpoint():
    assert {c.number for c in CASES} == set(range(1, 19))
    fives = [c for c in CASES if c.number == 5]
    assert len(fives) == len(FAILPOINTS) * 2 * 2  # savers x durabilities
    assert {c.label for c in QUICK if c.number != 5} == {"1", "4", "6", "11", "15"}
    assert all((c.saver, c.durability) == ("sqlite", "sync") for c in QUICK)
    assert [c.label for c in QUICK_MIDDLEWARE] == ["M1"]
    assert all(c.graph == "refund-agent" and c.bypass for c in QUICK_MIDDLEWARE)
    assert {c.number for c in MIDDLEWARE_CASES} == set(range(1, 19)) - {14, 17, 18}


def test_the_matrix_has_an_ambiguous_outcome_at_a_target_that_cannot_be_queried():
    unqueryable = [c for c in CASES if c.label == "6b"]
    assert unqueryable and "needs_reconciliation" in unqueryable[0].expectation
    assert unqueryable[0].bypass
    titles = {c.number: c.title for c in CASES}
    assert "@entrypoint/@task" in titles[17] and "redelivers" in titles[18]


def _result(**kw) -> RunResult:
    defaults = {"scenario": 1, "label": "1", "title": "t", "with_ledger": True,
                "passed": True, "why": "", "effects": {"acme/refund/a": 1}}
    return RunResult(**{**defaults, **kw})


def test_gate_counts_only_ledger_runs_and_needs_every_run_passing():
    bypassed = _result(with_ledger=False, effects={"acme/refund/a": 2},
                       uncorrelated_requests=2)
    gate = release_gate([_result(ambiguous={"acme/refund/a": "succeeded"}), bypassed])
    assert tuple(gate) == GATE_KEYS
    assert gate == {
        "max_business_effects_per_operation_key": 1,
        "every_scenario_passing": True,
        "uncorrelated_external_requests": 0,
        "approval_payload_mismatches_accepted": 0,
        "every_ambiguous_outcome_at_a_queryable_target_ends_succeeded_or_failed": True,
        "every_ambiguous_outcome_at_an_unqueryable_target_ends_needs_reconciliation": True,
    }
    assert gate_passed(gate)
    for bad in (_result(effects={"acme/refund/a": 2}), _result(passed=False),
                _result(uncorrelated_requests=1), _result(approval_mismatches_accepted=1),
                _result(ambiguous={"acme/refund/a": "reconciling"})):
        assert not gate_passed(release_gate([_result(), bad])), bad
    assert not gate_passed(release_gate([]))


def test_an_ambiguous_outcome_ends_as_its_target_allows():
    """A target that can be queried settles the key by lookup; one that cannot leaves it to
    an operator: any other end (a guess) fails the gate."""
    queryable = _result(ambiguous={"acme/refund/a": "succeeded"})
    unqueryable = _result(ambiguous={"acme/refund/a": "needs_reconciliation"},
                          target_queryable=False)
    gate = release_gate([queryable, unqueryable])
    assert gate[AMBIGUOUS_QUERYABLE] is True and gate[AMBIGUOUS_UNQUERYABLE] is True
    assert gate_passed(gate)
    for status in ("succeeded", "failed", "reconciling"):
        guessed = _result(ambiguous={"acme/refund/a": status}, target_queryable=False)
        gate = release_gate([queryable, guessed])
        assert gate[AMBIGUOUS_UNQUERYABLE] is False and not gate_passed(gate), status
    for status in ("needs_reconciliation", "reconciling"):
        unsettled = _result(ambiguous={"acme/refund/a": status})
        gate = release_gate([unsettled, unqueryable])
        assert gate[AMBIGUOUS_QUERYABLE] is False and not gate_passed(gate), status
