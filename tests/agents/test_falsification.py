"""The fast subset of the falsification matrix (the full one: `make falsify`).

Each case runs in a world of its own with real worker processes, real LangGraph checkpoints
(SQLite, durability sync) and real SIGKILLs, once with the ledger and, where meaningful,
once bypassing it; the bypassed run must show the duplicate, or the scenario is not real.
The verdicts are read from the payments sandbox's own ledger.
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
from ledger_lab.falsify.scenarios.failpoints import FAILPOINTS
from ledger_stream.config import Settings

QUICK = select(quick=True)
# The same scenarios run by the create_agent agent on LedgerMiddleware (a few of them here;
# `ledger-stream falsify --agent middleware` runs them all).
QUICK_MIDDLEWARE = select(quick=True, agent="middleware")


# The runs without the ledger that `make test` repeats: a resumed step, a fork, the
# middleware. The full matrix (`make falsify`, docs/falsification.md) bypasses
# every case that has a bypass.
QUICK_BYPASS = {"1", "4", "M1"}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("case", QUICK + QUICK_MIDDLEWARE,
                         ids=[c.label.replace(" ", "-") for c in QUICK + QUICK_MIDDLEWARE])
def test_quick_case(case, ledger_settings: Settings, tmp_path: Path):
    bypass = case.bypass and case.label in QUICK_BYPASS
    results = run_case(case, ledger_settings, tmp_path, bypass=bypass)
    assert [r.with_ledger for r in results] == ([True, False] if bypass else [True]), \
        table(results)
    for result in results:
        assert result.passed, table(results)
    ledger = results[0]
    assert ledger.max_effects <= 1 and ledger.uncorrelated_requests == 0, table(results)
    if bypass:
        assert results[1].why.startswith("without the ledger"), table(results)


def test_the_matrix_covers_every_scenario_and_failpoint():
    assert {c.number for c in CASES} == set(range(1, 17))
    fives = [c for c in CASES if c.number == 5]
    assert len(fives) == len(FAILPOINTS) * 2 * 2  # savers x durabilities
    assert {c.label for c in QUICK if c.number != 5} == {"1", "4", "6", "11", "15"}
    assert all((c.saver, c.durability) == ("sqlite", "sync") for c in QUICK)
    assert [c.label for c in QUICK_MIDDLEWARE] == ["M1"]
    assert all(c.graph == "refund-agent" and c.bypass for c in QUICK_MIDDLEWARE)
    assert {c.number for c in MIDDLEWARE_CASES} == set(range(1, 17)) - {14}


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
        "every_ambiguous_outcome_ends_in_succeeded_failed_or_needs_reconciliation": True,
    }
    assert gate_passed(gate)
    for bad in (_result(effects={"acme/refund/a": 2}), _result(passed=False),
                _result(uncorrelated_requests=1), _result(approval_mismatches_accepted=1),
                _result(ambiguous={"acme/refund/a": "reconciling"})):
        assert not gate_passed(release_gate([_result(), bad])), bad
    assert not gate_passed(release_gate([]))
