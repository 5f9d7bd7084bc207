"""What travels between the processes of a simulated run: produces to the broker, calls and
lookups to the target, and their answers, each completed by a step of its own.

A call is checked against its lease when the instance takes the ``Call`` command and sent
at once, unless the run freezes the instance right there (the one window no lease closes).
At the target a request may wait (a slow target) and commit until its lease ends, even after
its caller gave up; a response may be lost after the commit.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from ledger_lab.simulation.fleet import Fleet, Instance, Wire
from ledger_lab.simulation.processor import SimProcessor
from ledger_lab.simulation.target import SimTarget
from ledger_stream.domain import events as ev


class World(Protocol):
    """What the wire needs of the simulated world (simulation/world.py's ``World``, which
    imports this module: named here as a protocol, so the two do not import each other)."""

    now: int
    rng: random.Random
    fleet: Fleet
    processor: SimProcessor
    target: SimTarget
    sends: list[tuple[str, str, int, bool, int | None]]

    def fault_for(self, operation: str) -> str: ...

    def kill(self, inst: Instance) -> None: ...

    def lease_of(self, claim_id: str) -> int | None: ...

Step = tuple[str, Callable[..., None], object]


def wire_step(world: World, w: Wire) -> Step | None:
    """The step that moves ``w`` on now, if one is possible."""
    inst, now = w.inst, world.now
    listening = inst.awake(now) and not w.timed_out
    if w.kind == "produce":
        return None if now < w.held_until else ("{}'s produce reaches the broker", deliver, w)
    if w.kind == "lookup":
        return ("{} looks up", lookup, w) if listening else None
    if w.stage == "checked":
        return ("{} sends its call", send, w) if listening else None
    timeout_ms = int(world.fleet.options.call_timeout_s * 1000)
    open_at_target = now < max(w.sent_at + timeout_ms, w.lease_until)
    if w.stage == "sent" and open_at_target and now >= w.held_until:
        return ("target handles {}'s request", handle, w)
    if w.stage == "answered" and listening:
        return ("{} gets the response", respond, w)
    if listening and inst.clock(now) >= w.sent_at + timeout_ms:
        return ("{}'s call times out", timeout, w)
    if (w.timed_out or not inst.alive) and (w.stage != "sent" or not open_at_target):
        return ("{}'s request is gone", gone, w)
    return None


def deliver(world: World, w: Wire) -> None:
    world.fleet.wire.remove(w)
    event = w.command.event  # type: ignore[union-attr]
    if w.fault != "produce_lost":
        world.processor.append(event, world.now)
    inst = w.inst
    if inst.alive and isinstance(event, ev.AttemptOutcome) and \
            world.fault_for("outcome_ack") == "after_outcome":
        world.kill(inst)  # the outcome is recorded; its dispatch offset is not committed
    elif inst.alive:
        ok = not w.fault
        inst.outbox.extend(inst.core.produced(w.job_id, ok, inst.clock(world.now),
                                              "" if ok else w.fault))


def lookup(world: World, w: Wire) -> None:
    down = world.fault_for("lookup") == "lookup_down"
    if down or not world.target.queryable:
        world.fleet.lookup_answer(w, None, "target cannot be queried", world.now)
    else:
        found = world.target.lookup(w.command.key)  # type: ignore[union-attr]
        world.fleet.lookup_answer(w, found, "", world.now)


def send(world: World, w: Wire) -> None:
    w.stage, w.sent_at = "sent", world.now
    request = w.command.request  # type: ignore[union-attr]
    lease = world.lease_of(request.attempt_id)
    # The request may linger at the target and commit until its lease ends (the bound the
    # lease rule rests on), even after its caller timed out.
    w.lease_until = lease or 0
    world.sends.append((request.key, request.attempt_id, world.now, w.frozen_window, lease))
    if w.fault == "slow":  # the target sits on it: it commits late, its caller gave up
        end = max(w.sent_at + int(world.fleet.options.call_timeout_s * 1000), w.lease_until)
        w.held_until = world.rng.randint(w.sent_at, end - 1)


def handle(world: World, w: Wire) -> None:
    request = w.command.request  # type: ignore[union-attr]
    w.stage = "answered"
    # A deduplicating target answers a key it knows with the original receipt.
    known = world.target.deduplicates and world.target.lookup(request.key) is not None
    if not known and w.fault in ("refuse", "reject"):
        w.status = (ev.OutcomeStatus.NOT_APPLIED if w.fault == "refuse"
                    else ev.OutcomeStatus.FAILED)
        return
    late = bool(w.lease_until) and world.now >= w.lease_until
    w.external_id = world.target.commit(request.key, request.attempt_id, request.args_hash,
                                        world.now, late)
    if w.fault in ("drop", "slow"):
        w.stage = "dropped"  # committed; the response never arrives


def respond(world: World, w: Wire) -> None:
    world.fleet.wire.remove(w)
    inst = w.inst
    if world.fault_for("response") == "after_call":
        world.kill(inst)  # the target answered; nothing was handled
        return
    error = "" if w.status is ev.OutcomeStatus.SUCCEEDED else f"target said {w.status.value}"
    inst.outbox.extend(inst.core.called(w.job_id, w.status, w.external_id, error,
                                        inst.clock(world.now)))


def timeout(world: World, w: Wire) -> None:
    inst = w.inst
    w.timed_out = True  # a request still at the target may commit until its deadline
    inst.outbox.extend(inst.core.called(w.job_id, ev.OutcomeStatus.UNKNOWN, "", "timed out",
                                        inst.clock(world.now)))


def gone(world: World, w: Wire) -> None:
    world.fleet.wire.remove(w)
