"""What each fault kind does to the world when the schedule fires it, and how long it lasts.

The victim is drawn from the seeded RNG among what runs at that moment. A killed member stays
down for a drawn 1–4 s (the supervisor then starts it again); a paused one is SIGSTOPped past
its session and lease timeouts and SIGCONTed. A broker fault hits the leader of a ledger
partition or the active KRaft controller, and is deferred while another broker is still down,
not yet back in the cluster's metadata, or a ledger partition is still under-replicated:
three replicas with min ISR 2 survive one loss, not two (two at once stop the ledger, which
is the min-ISR test's business, not the soak's). A
fault that cannot fire yet never blocks the scheduler: it is tried again a second later.
"""

from __future__ import annotations

import json
import random
import signal
import time
from dataclasses import dataclass

from ledger_lab.chaos.world import Member, World
from ledger_lab.sandbox.faults import FAULT_MODES

LEDGER_TOPICS = ("intents", "attempts", "dispatch", "receipts")


@dataclass(frozen=True)
class FaultRecord:
    at_s: float  # seconds after the load started
    kind: str
    victim: str  # the member (or target mode) it hit; "" when it could not fire
    detail: str = ""
    at_ms: int = 0  # wall clock when it fired, for the checker's causes


class Deferred(Exception):
    """The fault cannot fire now (its victim is still down from an earlier one): the
    scheduler tries it again shortly, and reports it as not fired if the load ends first."""


def inject(world: World, kind: str, rng: random.Random, at_s: float) -> FaultRecord:
    """Fire one fault; raises Deferred when it cannot fire yet."""
    fire = _KINDS[kind]
    victim, detail = fire(world, rng)
    return FaultRecord(round(at_s, 2), kind, victim, detail, int(time.time() * 1000))


def _down(world: World, rng: random.Random) -> float:
    low, high = world.options.down_s
    return time.monotonic() + rng.uniform(low, high)


def _kill_one(world: World, rng: random.Random, roles: tuple[str, ...]) -> tuple[str, str]:
    candidates = [m for m in world.members if m.role in roles and m.running()
                  and not m.paused and m.held_until <= time.monotonic()]
    if not candidates:
        return "", f"no running {'/'.join(roles)} to kill"
    victim = rng.choice(candidates)
    victim.held_until = _down(world, rng)
    victim.crash()
    return victim.name, "SIGKILL"


def _processor_kill(world: World, rng: random.Random) -> tuple[str, str]:
    return _kill_one(world, rng, ("processor",))


def _connector_kill(world: World, rng: random.Random) -> tuple[str, str]:
    return _kill_one(world, rng, ("connector",))


def _agent_kill(world: World, rng: random.Random) -> tuple[str, str]:
    return _kill_one(world, rng, ("agent",))


def _target_kill(world: World, rng: random.Random) -> tuple[str, str]:
    return _kill_one(world, rng, ("target",))


def _pause(world: World, rng: random.Random) -> tuple[str, str]:
    candidates = [m for m in world.members if m.role in ("processor", "connector")
                  and m.running() and not m.paused and m.held_until <= time.monotonic()]
    if not candidates:
        return "", "no running processor or connector to pause"
    victim = rng.choice(candidates)
    if not victim.signal(signal.SIGSTOP):
        return "", f"{victim.name} exited before it could be paused"
    victim.paused = True
    victim.held_until = time.monotonic() + world.options.pause_s
    return victim.name, f"SIGSTOP for {world.options.pause_s:g} s"


def _target_fault(world: World, rng: random.Random) -> tuple[str, str]:
    sandbox = world.sandbox
    assert sandbox is not None
    mode = rng.choice(FAULT_MODES)
    try:
        sandbox.set_fault(mode)
    except OSError as exc:  # down (a kill or a crash fault): the supervisor starts it again
        raise Deferred("the payments sandbox is down") from exc
    return "payments-sandbox", mode


def _broker_kill(world: World, rng: random.Random) -> tuple[str, str]:
    brokers = world.by_role("broker")
    if not all(b.running() and not b.starting and b.held_until <= time.monotonic()
               for b in brokers):
        raise Deferred("another broker is not back yet")
    if not _replicas_caught_up(world):
        raise Deferred("a ledger partition is still under-replicated")
    if rng.random() < 0.5:
        node, why = _active_controller(world), "the active controller"
    else:
        node, why = _partition_leader(world, rng)
    victim: Member | None = next((b for b in brokers if b.name == f"broker-{node}"), None)
    if victim is None:
        victim, why = rng.choice(brokers), "a broker (no leader known)"
    victim.held_until = _down(world, rng)
    victim.crash()
    return victim.name, why


def _replicas_caught_up(world: World) -> bool:
    """Every ledger partition has all its replicas in sync (the last restarted broker has
    caught up): killing another broker now takes only one replica away."""
    settings = world.settings
    assert settings is not None
    try:
        meta = world.admin().list_topics(timeout=2).topics
    except Exception:  # noqa: BLE001 - no answer: not known to be caught up
        return False
    return all(len(part.isrs) == len(part.replicas)
               for name in LEDGER_TOPICS if settings.topic(name) in meta
               for part in meta[settings.topic(name)].partitions.values())


def _partition_leader(world: World, rng: random.Random) -> tuple[int | None, str]:
    settings = world.settings
    assert settings is not None
    topic = settings.topic(rng.choice(LEDGER_TOPICS))
    partition = rng.randrange(settings.partitions)
    try:
        meta = world.admin().list_topics(topic, timeout=2)
        leader = meta.topics[topic].partitions[partition].leader
    except Exception:  # noqa: BLE001 - metadata unavailable: fall back to any broker
        return None, ""
    return leader, f"the leader of {topic}[{partition}]"


def _active_controller(world: World) -> int | None:
    """The KRaft leader, from the nodes' own ``quorum-state`` files (highest epoch wins)."""
    best: tuple[int, int] | None = None
    for path in world.cluster.cluster_dir.glob("node-*/data/__cluster_metadata-0/quorum-state"):
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if state.get("leaderId", -1) >= 0 and (best is None or state["leaderEpoch"] > best[0]):
            best = (state["leaderEpoch"], state["leaderId"])
    return best[1] if best else None


_KINDS = {"processor-kill": _processor_kill, "connector-kill": _connector_kill,
          "agent-kill": _agent_kill, "target-kill": _target_kill, "broker-kill": _broker_kill,
          "pause": _pause, "target-fault": _target_fault}
