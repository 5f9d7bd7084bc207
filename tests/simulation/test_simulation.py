"""The deterministic simulation of the whole protocol (docs/design.md, 'Proof layers').

Seeded schedules of agents, the processor (the real ``decide``), connectors (the real
``ConnectorCore``), a target model in each variant and faults of every kind; invariants on
the target's own effects after each run. `make simulate SEED=... N=...` runs more.
"""

from __future__ import annotations

import logging
import os

import pytest

from ledger_lab.simulation import runner
from ledger_lab.simulation.invariants import violations
from ledger_lab.simulation.runner import config_for, run_many, run_one
from ledger_lab.simulation.world import FAULTS, SimConfig, World
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import Phase
from tests.simulation import background

# `make test` runs 100,000 (in a child process started at collection, background.py);
# `make mutate` runs fewer per mutant, in this process (LEDGER_SIM_TEST_RUNS).
BOUNDED_RUNS = int(os.environ.get("LEDGER_SIM_TEST_RUNS", str(background.RUNS)))
WORKERS = int(os.environ.get("LEDGER_SIM_WORKERS", "0")) or os.cpu_count() or 1


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)  # the connector core warns under faults, by design
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.timeout(900)
def test_a_hundred_thousand_schedules_keep_every_invariant():
    child = background.running()
    if child is not None:
        code, summary, tail = child.result(880)
        failing = summary.get("failing_seeds")
        shown = {**summary, "failing_seeds": f"{len(failing)}: {failing[:20]} ..."} \
            if isinstance(failing, list) else summary
        assert code == 0 and failing == [], f"the simulation failed (exit {code}): " \
            f"{shown}\n{tail[-3000:]}"
        assert summary["runs"] == BOUNDED_RUNS and summary["first_seed"] == 0, summary
        return
    failures = list(run_many(0, BOUNDED_RUNS, workers=WORKERS))
    report = "\n".join(f"seed {f.seed}: {f.problems}\n  " + "\n  ".join(f.trace)
                       for f in failures[:2])
    assert not failures, f"{len(failures)} failing seeds, e.g.\n{report}"


@pytest.mark.timeout(60)
def test_the_seeds_cover_every_target_variant_and_fault_kind():
    configs = [config_for(seed) for seed in range(600)]
    assert {(c.deduplicates, c.queryable, c.fast_path) for c in configs} == set(runner.TARGETS)
    assert {kind for c in configs for kind in c.faults} == set(FAULTS)


@pytest.mark.timeout(60)
def test_the_runs_reach_the_hard_cases():
    """Not only happy paths: unknown outcomes, lookups, operators, lapses, the window."""
    seen: set[str] = set()
    for seed in range(3_000):
        world = run_one(seed)
        for logged in world.processor.log:
            e = logged.event
            if isinstance(e, ev.AttemptOutcome):
                seen.add(e.status.value)
            elif isinstance(e, ev.ReconcileResult | ev.OperatorResolution):
                seen.add(type(e).__name__)
        seen |= {"late effect"} if any(e.late for e in world.target.effects) else set()
        seen |= {"two effects"} if len(world.target.effects) > 1 else set()
        seen |= {a.kind.value for a in world.processor.alerts}
    wanted = {"succeeded", "unknown", "not_applied", "failed", "not_called", "ReconcileResult",
              "OperatorResolution", "late effect", "reconciliation_required", "stalled"}
    assert wanted <= seen, f"never reached: {wanted - seen}"


@pytest.mark.timeout(60)
def test_the_one_window_gives_a_second_effect_and_it_is_always_reported():
    """A holder frozen between its lease check and its send, at a target that neither
    deduplicates nor answers lookups: the run can end with two effects (the one window no
    lease closes, docs/design.md), and then with a duplicate_effect alert once the late
    call's success is reported."""
    config = SimConfig(deduplicates=False, queryable=False, faults=("freeze_in_window",),
                       fault_budget=2)
    doubled = 0
    for seed in range(1_500):
        world = World(seed, config).run()
        assert not violations(world), seed
        if len(world.target.effects) > 1:
            doubled += 1
            assert ev.AlertKind.DUPLICATE_EFFECT in {a.kind for a in world.processor.alerts}
    assert doubled, "the window was never reached: the simulation would miss its alert"


@pytest.mark.timeout(60)
def test_a_seed_replays_exactly():
    first, again = run_one(1234), run_one(1234)
    assert first.trace == again.trace
    assert first.target.effects == again.target.effects


@pytest.mark.timeout(120)
def test_a_broken_rule_is_caught_with_its_seed_and_a_shorter_replayable_trace(monkeypatch):
    """Break the one-grant-per-attempt rule (a late claim gets a second Grant): the
    simulation must fail, name the seed, and give a shorter trace that still fails."""
    import sys

    from ledger_stream.domain.state import AttemptRecord
    from ledger_stream.domain.transitions import Decision, enter

    decide_module = sys.modules["ledger_stream.domain.decide"]
    real_claim = decide_module._claim

    def claim_granting_twice(state, claim, now, appended):
        if state.phase is Phase.DISPATCHED and claim.attempt == state.attempt \
                and claim.claim_id != state.granted_claim_id and now >= state.lease_until_ms:
            lease = now + claim.lease_ms
            granted = enter(state, Phase.DISPATCHED, now,
                            AttemptRecord(claim.attempt, claim.claim_id, "granted", now),
                            granted_claim_id=claim.claim_id, lease_until_ms=lease)
            return Decision(granted, (ev.Grant(state.key, claim.attempt, claim.claim_id,
                                               lease, now),))
        return real_claim(state, claim, now, appended)

    monkeypatch.setattr(decide_module, "_claim", claim_granting_twice)
    failures = list(run_many(0, 400, workers=1))
    assert failures, "a protocol that grants one attempt twice went unnoticed"
    failure = failures[0]
    assert any("claims granted" in p or "effects" in p for p in failure.problems)
    full = run_one(failure.seed)
    assert len(failure.trace) <= len(full.trace)
    assert violations(full)
