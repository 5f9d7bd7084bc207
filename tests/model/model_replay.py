"""Replaying this model's counterexamples on the real code, step for step.

The suite's trace replay (``ledger_lab/simulation/traces.py``, run by
``tests/simulation/test_traces.py`` over every file in ``tests/protocol_traces/``) understands
the reference model's line shapes and skips lines in parentheses. This model prints a few steps
that replay cannot take as such parenthesised lines (a deadline timer, a time-out, a dropped
response, a reconciliation started from the queue, a processor restart from a later offset, an
operator's chosen resolution), so its traces stay valid input for the suite's replay. Here
those lines are acted on too, and a claim that waits for a backoff or a Held lease gets the
clock moved to its wake-up, so the real ``decide`` and ``ConnectorCore`` follow the model's
schedule closely enough to show whether a counterexample is real.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from ledger_lab.simulation import network
from ledger_lab.simulation import traces as base
from ledger_lab.simulation.invariants import violations
from ledger_lab.simulation.processor import SimProcessor
from ledger_lab.simulation.world import World
from ledger_stream.connector.commands import Lookup
from ledger_stream.domain import due_ms
from ledger_stream.domain import events as ev


def _deadline(world: World, _attempt: str) -> bool:
    """The key's deadline passes: move the clock to it and append the Tick that fires it."""
    policy = world.processor.policy
    due = due_ms(world.processor.state(world.keys[0]), policy)
    if due is None:
        return False
    world.now = max(world.now, due)
    world.processor.append(ev.Tick(0, "model", world.now), world.now)
    return True


def _call_wire(world: World, k: str, stages: tuple[str, ...]) -> network.Wire | None:
    inst = base._conn(world, k)
    for w in world.fleet.wire:
        if w.inst is inst and w.kind == "call" and w.stage in stages and not w.timed_out:
            return w
    return None


def _timeout(world: World, k: str) -> bool:
    w = _call_wire(world, k, ("sent", "dropped", "answered"))
    if w is None:
        return False
    network.timeout(world, w)
    return True


def _drop(world: World, k: str) -> bool:
    w = _call_wire(world, k, ("answered",))
    if w is None:
        return False
    w.stage = "dropped"
    return True


def _lose(world: World) -> bool:
    for w in world.fleet.wire:
        if w.kind == "call" and w.stage == "sent" and (w.timed_out or not w.inst.alive):
            network.gone(world, w)
            return True
    return False


def _queued_reconcile(world: World, k: str) -> bool:
    """A Reconcile job that was read earlier starts: look up, produce the result."""
    inst = base._conn(world, k)
    _, lookup = base._until(world, inst, lambda c: isinstance(c, Lookup))
    if lookup is None:
        return False
    network.lookup(world, lookup)
    return base._produce(world, k, ev.ReconcileResult)


def _crash_to(world: World, offset: str) -> bool:
    """The processor restarts from the committed offset the model chose."""
    p, k = world.processor, int(offset)
    fresh = SimProcessor(p.policy)
    fresh.log = p.log[:k]
    while fresh.behind():
        fresh.step(world.now)
    p.states, p.clock, p.position = dict(fresh.states), fresh.clock, k
    p.committed, p._snapshot = k, (dict(fresh.states), fresh.clock)
    return True


_RESOLUTIONS = {"applied": ev.Resolution.APPLIED, "not applied": ev.Resolution.NOT_APPLIED,
                "failed": ev.Resolution.FAILED}


def _operator(world: World, attempt: str, kind: str) -> bool:
    """The operator's resolution, as the model chose it (from the target's true state)."""
    key = world.keys[0]
    state = world.processor.state(key)
    world.resolved.add((key, state.attempt, state.phase_since_ms))
    found = world.target.lookup(key) or ""
    world.processor.append(ev.OperatorResolution(
        f"op-{len(world.resolved)}", key, int(attempt), _RESOLUTIONS[kind], "ops", world.now,
        found), world.now)
    return True


def _claim(world: World, k: str) -> bool:
    """A claim; a job waiting for its dispatch's ``not_before`` or a Held lease is woken."""
    if base._produce(world, k, ev.AttemptClaim):
        return True
    inst = base._conn(world, k)
    wake = inst.core.next_wake_ms()
    if wake is None or not inst.awake(world.now):
        return False
    world.now = max(world.now, wake - inst.skew_ms)
    inst.outbox.extend(inst.core.tick(inst.clock(world.now)))
    return base._produce(world, k, ev.AttemptClaim)


_EXTRA: list[tuple[str, Callable[..., bool]]] = [
    (r"\(TIME\s+the deadline of attempt (\d+) passes", _deadline),
    (r"\(PROCESSOR\s+log\[\d+\] Timer", base._decide),
    (r"\(CONNECTOR(\d) times out", _timeout),
    (r"\(NETWORK\s+drops the response to CONNECTOR(\d)", _drop),
    (r"\(NETWORK\s+loses an abandoned request", _lose),
    (r"\(CONNECTOR(\d) starts dq\[\d+\] Reconcile", _queued_reconcile),
    (r"PROCESSOR\s+CRASH \+ restart: state rolled back to offset (\d+)", _crash_to),
    (r"OPERATOR\s+OperatorResolution\(n=(\d+), (applied|not applied|failed)\)", _operator),
    (r"CONNECTOR(\d)\s+Claim\(", _claim),
]


def replay(text: str) -> base.Replay:
    world = World(0, base.variant_of(text))
    world.todo.clear()
    result = base.Replay(world)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "spin")):
            continue
        for pattern, act in _EXTRA:
            match = re.match(pattern, line)
            if match:
                done = act(world, *match.groups())
                break
        else:
            if line.startswith("("):
                continue
            done = base._directive(world, line)
        (result.followed if done else result.skipped).append(line)
    world.heal()
    return result


def replay_problems(path: Path) -> tuple[list[str], base.Replay]:
    """The invariants the real code breaks when it follows the trace (empty: none)."""
    logging.disable(logging.WARNING)
    try:
        result = replay(path.read_text(encoding="utf-8"))
    finally:
        logging.disable(logging.NOTSET)
    return violations(result.world), result
