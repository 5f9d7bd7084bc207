"""Replaying a protocol trace (the model checker's counterexamples; docs/design.md, 'Proof
layers') on the real code: the trace's schedule and faults drive the simulated world, the real
``decide`` and ``ConnectorCore`` decide what each process does, and the run must end with every
invariant holding.

A trace line names who moves and what it did under the older protocol that failed. Here it
means "let this process take its next step of that kind" — a claim, a call, a read, an
outcome — and the faults (crash, freeze, rebalance, a lease running out, an operator's
resolution) are injected where the trace puts them. A step the current protocol does not
take at that point (a connector that rightly does not call) is skipped and listed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ledger_lab.simulation import network
from ledger_lab.simulation.fleet import Instance, Wire
from ledger_lab.simulation.world import SimConfig, World, _intent, _resolve
from ledger_stream.connector.commands import Call, Commit, Lookup, Produce
from ledger_stream.domain import events as ev

FAR = 10**12  # a freeze the trace ends with "wakes up"


@dataclass
class Replay:
    world: World
    followed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def variant_of(text: str) -> SimConfig:
    """The model's target variant: (a) deduplicates and answers lookups (``-DDEDUP=1``),
    (b) does neither; ``-DFAST=1`` is the fast path."""
    dedup = "-DDEDUP=1" in text
    return SimConfig(deduplicates=dedup, queryable=dedup, fast_path=dedup and "-DFAST=1" in text,
                     keys=1, connectors=2, duplicates=0, conflicting=False, faults=(),
                     max_skew_ms=0)


def replay_file(path: Path) -> Replay:
    return replay(path.read_text(encoding="utf-8"))


def replay(text: str) -> Replay:
    world = World(0, variant_of(text))
    world.todo.clear()
    result = Replay(world)
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#(" or line.startswith("spin"):
            continue
        done = _directive(world, line)
        (result.followed if done else result.skipped).append(line)
    world.heal()
    return result


def _directive(world: World, line: str) -> bool:
    for pattern, act in _DIRECTIVES:
        match = re.match(pattern, line)
        if match:
            return act(world, *match.groups())
    raise ValueError(f"unknown trace line: {line!r}")


# --- the processes ------------------------------------------------------------------------


def _conn(world: World, k: str) -> Instance:
    """CONNECTORk: the latest incarnation with that number (restarts keep the number)."""
    return next(i for i in reversed(world.fleet.instances) if i.alias == f"conn{k}")


def _agent(world: World, args: str) -> bool:
    key = world.keys[0]
    world.processor.append(_intent(key, len(world.processor.log), int(args)), world.now)
    return True


def _decide(world: World) -> bool:
    if not world.processor.behind():
        return False
    world.processor.step(world.now)
    return True


def _processor_crash(world: World) -> bool:
    world.processor.crash()
    return True


def _read(world: World, k: str) -> bool:
    inst = _conn(world, k)
    if not (inst.awake(world.now) and inst.owns and
            inst.position < len(world.processor.dispatch)):
        return False
    world.fleet.read(inst, world.processor.dispatch, world.now)
    return True


def _until(world: World, inst: Instance,
           wanted: Callable[[object], bool]) -> tuple[bool, Wire | None]:
    """Let ``inst`` act on its commands up to the first ``wanted`` one: whether it got
    there, and the wire item that command put on the network (if any)."""
    while inst.alive and inst.outbox and inst.awake(world.now):
        cmd = inst.outbox[0]
        last = world.fleet.wire[-1] if world.fleet.wire else None
        world.fleet.take(inst, world.now)
        if wanted(cmd):
            new = world.fleet.wire[-1] if world.fleet.wire else None
            return True, (new if new is not last else None)
    return False, None


def _produce(world: World, k: str, kind: type) -> bool:
    inst = _conn(world, k)
    _, w = _until(world, inst, lambda c: isinstance(c, Produce) and isinstance(c.event, kind))
    if w is None:
        return False
    network.deliver(world, w)
    return True


def _check_lease(world: World, k: str) -> bool:
    """The holder checks its lease (a Call command): the request is not sent yet."""
    return _until(world, _conn(world, k), lambda c: isinstance(c, Call))[0]


def _send(world: World, k: str) -> bool:
    inst = _conn(world, k)
    for w in world.fleet.wire:
        if w.inst is inst and w.stage == "checked" and inst.awake(world.now):
            network.send(world, w)
            return True
    return False


def _target(world: World, refuse: bool) -> bool:
    for w in world.fleet.wire:
        if w.kind == "call" and w.stage == "sent":
            w.fault = "refuse" if refuse else w.fault
            network.handle(world, w)
            return True
    return False


def _response(world: World, k: str) -> bool:
    inst = _conn(world, k)
    for w in world.fleet.wire:
        if w.inst is inst and w.kind == "call" and w.stage == "answered":
            network.respond(world, w)
            return True
    return False


def _commit(world: World, k: str) -> bool:
    return _until(world, _conn(world, k), lambda c: isinstance(c, Commit))[0]


def _reconcile(world: World, k: str) -> bool:
    inst = _conn(world, k)
    if not _read(world, k):
        return False
    _, lookup = _until(world, inst, lambda c: isinstance(c, Lookup))
    if lookup is None:
        return False
    network.lookup(world, lookup)
    return _produce(world, k, ev.ReconcileResult)


# --- the faults ---------------------------------------------------------------------------


def _freeze(world: World, k: str) -> bool:
    inst = _conn(world, k)
    inst.frozen_at, inst.frozen_until = world.now, FAR
    for w in world.fleet.wire:
        if w.inst is inst and w.stage == "checked":
            w.frozen_window = True  # frozen after its lease check, before sending
    return True


def _wake(world: World, k: str) -> bool:
    inst = _conn(world, k)
    inst.frozen_until = world.now
    if inst.lost:
        inst.lost = False
        inst.outbox.extend(inst.core.revoked([0], inst.clock(world.now)))
    return True


def _crash(world: World, k: str) -> bool:
    inst = _conn(world, k)
    world.kill(inst)
    world.fleet.instances[-1].alias = inst.alias  # the restarted process keeps its number
    return True


def _rebalance(world: World, k: str) -> bool:
    new = _conn(world, k)
    old = world.fleet.owner
    if old is not None and old is not new:
        world.fleet.revoke(old, world.now)
    world.fleet.assign(new, len(world.processor.dispatch))
    return True


def _lease_expires(world: World, attempt: str) -> bool:
    """Time moves past the lease of attempt n: the lease its first claim would get."""
    n = int(attempt)
    policy, lease = world.processor.policy, world.fleet.options.lease_ms
    claims = [logged.ts for logged in world.processor.log
              if isinstance(logged.event, ev.AttemptClaim) and logged.event.attempt == n]
    start = claims[0] if claims else world.now
    world.now = max(world.now, start + lease + policy.clock_skew_ms + 1)
    return True


def _operator(world: World) -> bool:
    key = world.keys[0]
    if not world.operator_may_act(key):
        return False
    _resolve(world, key)
    return True


def _ignore(world: World, *_: str) -> bool:
    return False


_DIRECTIVES: list[tuple[str, Callable[..., bool]]] = [
    (r"AGENT\s+Intent\(args=(\d+)\)", _agent),
    (r"PROCESSOR\s+CRASH", _processor_crash),
    (r"PROCESSOR\s+log\[", _decide),
    (r"CONNECTOR(\d)\s+reads dq\[\d+\] Reconcile", _reconcile),
    (r"CONNECTOR(\d)\s+reads dq", _read),
    (r"CONNECTOR(\d)\s+takes dq", _read),
    (r"CONNECTOR(\d)\s+Claim\(", lambda w, k: _produce(w, k, ev.AttemptClaim)),
    (r"CONNECTOR(\d)\s+Outcome\(", lambda w, k: _produce(w, k, ev.AttemptOutcome)),
    (r"CONNECTOR(\d)\s+lease \d+ (?:still valid|already expired)", _check_lease),
    (r"CONNECTOR(\d)\s+sends request", _send),
    (r"CONNECTOR(\d)\s+gets the response", _response),
    (r"CONNECTOR(\d)\s+commits dispatch offset", _commit),
    (r"TARGET\s+COMMITS", lambda w: _target(w, refuse=False)),
    (r"TARGET\s+rejects", lambda w: _target(w, refuse=True)),
    (r"FAULT\s+CONNECTOR(\d) FREEZES", _freeze),
    (r"FAULT\s+CONNECTOR(\d) wakes up", _wake),
    (r"FAULT\s+CONNECTOR(\d) CRASHES", _crash),
    (r"FAULT\s+rebalance: partition -> CONNECTOR(\d)", _rebalance),
    (r"TIME\s+lease of attempt (\d+) expires", _lease_expires),
    (r"OPERATOR\s+OperatorResolution", _operator),
    (r"OPERATOR\s+inspects", _ignore),
]
