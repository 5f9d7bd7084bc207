"""The simulation with the processor pre-granting attempt 1 (docs/connectors.md, 'The
pre-granted first attempt'): seeded schedules in which connectors fence live pre-granted
dispatches (a synchronous commit the group takes only from the partition's owner), call
without waiting for the Grant, lose fences to the coordinator, and lose their partition;
the invariants are checked on the simulated target's own effects."""

from __future__ import annotations

import logging
import os

import pytest

from ledger_lab.simulation.invariants import violations
from ledger_lab.simulation.runner import pregrant_config_for, shortest_trace
from ledger_lab.simulation.world import World
from ledger_stream.domain import events as ev

RUNS = int(os.environ.get("LEDGER_SIM_PREGRANT_RUNS", "5000"))


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)  # the connector core warns under faults, by design
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.timeout(600)
def test_pregranted_schedules_keep_every_invariant_and_reach_the_fence_cases():
    seen: set[str] = set()
    for seed in range(RUNS):
        world = World(seed, pregrant_config_for(seed)).run()
        problems = violations(world)
        assert not problems, f"seed {seed}: {problems}\n" + "\n".join(
            shortest_trace(seed, world))
        log = [logged.event for logged in world.processor.log]
        fenced = {e.claim_id for e in log if isinstance(e, ev.AttemptClaim) and e.fenced}
        if any(e.claim_id in fenced for e in world.target.effects):
            seen.add("an effect of a fenced claim")
        if any(isinstance(e, ev.AttemptOutcome) and e.claim_id in fenced
               and e.status is ev.OutcomeStatus.NOT_CALLED for e in log):
            seen.add("a fenced claim not called")
        if any(isinstance(e, ev.AttemptClaim) and not e.fenced for e in log):
            seen.add("a plain claim")
        seen |= {line.split("FAULT ", 1)[1] for line in world.trace
                 if "FAULT fence" in line}
        if any("acts on Fence" in line for line in world.trace) and \
                any("learns it lost" in line for line in world.trace):
            seen.add("a fence and a lost partition")
    wanted = {"an effect of a fenced claim", "a fenced claim not called", "a plain claim",
              "fence_refused", "fence_lost", "a fence and a lost partition"}
    assert wanted <= seen, f"never reached: {wanted - seen}"
