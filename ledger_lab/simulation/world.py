"""One seeded run of the whole protocol: agents, the processor, a connector fleet, a target,
an operator, and faults, interleaved by a random scheduler.

Every step picks one enabled action; a run is its list of choices, so a seed (or a recorded
choice list) replays it exactly. Faults come from a budget per kind. After the faulty part
the world heals (no new faults, frozen processes wake, dead ones are replaced) and runs to
quiescence, so progress can be judged.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger_lab.simulation import network
from ledger_lab.simulation.fleet import Fleet, Instance
from ledger_lab.simulation.processor import SimProcessor
from ledger_lab.simulation.target import SimTarget
from ledger_stream.connector.commands import Call, Fence, Produce
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.domain import Policy, due_ms
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json
from ledger_stream.domain.state import Phase

# The connector failpoints of ledger_stream/failpoints.py: the process dies (SIGKILL) there.
FAILPOINTS = ("before_claim", "before_call", "after_call", "before_outcome", "after_outcome")
FAULTS = ("processor_crash", "processor_stall", "connector_crash", "freeze",
          "freeze_in_window", "rebalance", "refuse", "reject", "drop", "slow", "lookup_down",
          "produce_lost", "produce_nack", "produce_delay", *FAILPOINTS)
# Faults that hit the n-th operation of their kind, armed when the run starts.
ARMED = {"refuse": "call", "reject": "call", "drop": "call", "slow": "call",
         "freeze_in_window": "call", "lookup_down": "lookup", "produce_lost": "produce",
         "produce_nack": "produce", "produce_delay": "produce", "before_claim": "claim",
         "before_call": "call", "after_call": "response", "before_outcome": "outcome",
         "after_outcome": "outcome_ack", "fence_refused": "fence", "fence_lost": "fence"}
# Faults of a pre-grant run's fences: refused by the coordinator, or committed with the
# answer lost (the connector sees a failure; the group's offset moved).
FENCE_FAULTS = ("fence_refused", "fence_lost")
PAUSES = (500, 1_500, 3_000)  # how long a freeze, a stall or a network delay lasts
# A processor stall may also outlast lease + skew + stall_after + reconcile timeout (6.1 s
# under sim_policy): the deadlines of what it sends after it must still wait for answers,
# up to the policy's lag credit (5 s here, so the longest stall also runs past it).
LAGS = (*PAUSES, 8_000)
# How far one "time passes" step moves the clock: mostly a little, sometimes past a lease.
STEPS = (1, 1, 1, 10, 10, 10, 50, 50, 50, 200, 200, 600, 1_500)
SESSION_MS = 1_000
TARGET = "t"

Action = tuple[str, Callable[..., None], object]  # (label, do(world, arg), arg)


@dataclass(frozen=True)
class SimConfig:
    deduplicates: bool = True
    queryable: bool = True
    fast_path: bool = False
    keys: int = 1
    connectors: int = 2
    duplicates: int = 1  # identical intents after the first, per key
    conflicting: bool = True  # one intent with other arguments for the first key
    faults: tuple[str, ...] = FAULTS  # the kinds this run may inject
    fault_budget: int = 1  # per kind
    max_steps: int = 200
    max_skew_ms: int = 100
    # An exactly-once processor that pre-grants attempt 1 (at least once, whose replay can
    # write one Dispatch twice, never pre-grants).
    pregrant: bool = False


PREGRANT_LEASE_MS = 1_500


def sim_policy(pregrant: bool = False) -> Policy:
    return Policy(replay_window_ms=10**9, retry_backoff_ms=50,
                  max_attempts=3, clock_skew_ms=100, stall_after_ms=2_000,
                  reconcile_timeout_ms=3_000, lag_credit_ms=5_000,
                  pregrant_lease_ms=PREGRANT_LEASE_MS if pregrant else 0)


def sim_options(fast_path: bool) -> ConnectorOptions:
    return ConnectorOptions(lease_ms=1_000, call_timeout_s=0.3, record_margin_s=0.1,
                            clock_skew_ms=100, lookup_patience_s=0.5, answer_warn_s=1e9,
                            max_in_flight=4, fast_path=fast_path, fast_path_max_age_s=1.0)


@dataclass
class World:
    seed: int
    cfg: SimConfig
    choices: list[int] | None = None  # replay these instead of drawing
    now: int = 0
    trace: list[str] = field(default_factory=list)
    drawn: list[int] = field(default_factory=list)
    healing: bool = False
    stalled_until: int = 0
    # (key, claim id, sent at, frozen in the window, lease end of its grant if any)
    sends: list[tuple[str, str, int, bool, int | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        cfg = self.cfg
        self.rng = random.Random(self.seed)
        self.processor = SimProcessor(sim_policy(cfg.pregrant), exactly_once=cfg.pregrant)
        self.target = SimTarget(cfg.deduplicates, cfg.queryable)
        self.fleet = Fleet(sim_options(cfg.fast_path), TARGET, cfg.deduplicates, cfg.queryable)
        for _ in range(cfg.connectors):
            self.spawn()
        self.fleet.assign(self.fleet.instances[0], 0)
        self.keys = [f"acme/pay/k{i}" for i in range(cfg.keys)]
        self.todo = [_intent(key, n, variant)
                     for n, (key, variant) in enumerate(self._submissions())]
        self.budget = {k: cfg.fault_budget if k in cfg.faults else 0
                       for k in FAULTS + FENCE_FAULTS}
        self.armed: dict[str, list[list[object]]] = {
            op: [] for op in ("call", "lookup", "produce", "claim", "response", "outcome",
                              "outcome_ack", "fence")}
        for kind in cfg.faults:
            for _ in range(cfg.fault_budget if kind in ARMED else 0):
                self.armed[ARMED[kind]].append([kind, self.rng.randint(1, 3)])
        self.resolved: set[tuple[str, int, int]] = set()

    def _submissions(self) -> list[tuple[str, int]]:
        subs = [(key, 1) for key in self.keys for _ in range(1 + self.cfg.duplicates)]
        return subs + ([(self.keys[0], 2)] if self.cfg.conflicting else [])

    # --- running --------------------------------------------------------------------------

    def run(self) -> World:
        for n in range(self.cfg.max_steps):
            if not self.step() or (n % 8 == 0 and not self.todo and self.settled()):
                break
        self.heal()
        return self

    def step(self) -> bool:
        actions = self.actions()
        if not actions:
            return False
        if self.choices is not None:
            if len(self.drawn) >= len(self.choices):
                return False
            pick = self.choices[len(self.drawn)] % len(actions)
        else:
            pick = self.rng.randrange(len(actions))
        self.drawn.append(pick)
        label, do, arg = actions[pick]
        name = getattr(getattr(arg, "inst", arg), "name", arg)
        self.trace.append(f"t={self.now} " + label.format(name))
        do(self, arg)
        return True

    def heal(self) -> None:
        """No more faults; wake and replace processes; run until nothing is left to do,
        moving the clock to the next instant something is due whenever all is quiet."""
        self.healing = True
        for inst in self.fleet.instances:
            inst.frozen_until = min(inst.frozen_until, self.now)
        self.stalled_until = min(self.stalled_until, self.now)
        for _ in range(200):
            busy = 0
            while busy < 2_000 and self.step():
                busy += 1
            if self.settled():
                return
            instants = self.instants()
            self.now += max(1, min(instants[0] - self.now, 1_500) if instants else 1_500)
            self.tick()

    def settled(self) -> bool:
        p, f = self.processor, self.fleet
        if p.behind() or p.uncommitted or f.wire or self.todo or f.owner is None \
                or f.owner.position < len(p.dispatch):
            return False
        if any(i.outbox or not i.core.idle() for i in f.instances if i.alive):
            return False
        return all(p.state(k).phase in (Phase.SUCCEEDED, Phase.FAILED, Phase.ABSENT)
                   for k in self.keys)

    # --- what may happen next -------------------------------------------------------------

    def actions(self) -> list[Action]:
        acts: list[Action] = []
        add = acts.append
        p, f, now = self.processor, self.fleet, self.now
        if self.todo:
            add(("agent submits", _submit, None))
        if p.behind() and now >= self.stalled_until:
            add(("processor decides", _decide, None))
        elif p.uncommitted and now >= self.stalled_until:  # exactly once: the last commit
            add(("processor commits", lambda world, _: world.processor.commit(), None))
        if not self.healing and self.rng.random() < 0.35:
            add(("time passes", _time_passes, None))
        for inst in f.instances:
            if inst.awake(now):
                self._instance_actions(inst, add)
        for w in f.wire:
            wire = network.wire_step(self, w)
            if wire is not None:
                add(wire)
        self._group_actions(add)
        for key in self.keys:
            if self.operator_may_act(key):
                add(("operator resolves {}", _resolve, key))
        if not self.healing and self.rng.random() < 0.08:
            self._fault_actions(add)
        return acts

    def _instance_actions(self, inst: Instance, add: Callable[[Action], None]) -> None:
        if inst.lost:
            add(("{} learns it lost its partition", _told_lost, inst))
            # It learns in its next poll: a fence asked before (on the poll's thread) may
            # run first, and the coordinator refuses it (a member no longer in the group).
            if inst.outbox and isinstance(inst.outbox[0], Fence):
                add(("{} acts on Fence", _take, inst))
            return
        if inst.owns and inst.position < len(self.processor.dispatch):
            add(("{} reads the next dispatch record", _read, inst))
        if inst.outbox:
            add(("{} acts on " + type(inst.outbox[0]).__name__, _take, inst))
        wake = inst.core.next_wake_ms()
        if wake is not None and wake <= inst.clock(self.now):
            add(("{} wakes a job", _wake, inst))

    def _group_actions(self, add: Callable[[Action], None]) -> None:
        f = self.fleet
        owner = f.owner
        expired = owner is None or not owner.alive or (
            owner.frozen_until > self.now and self.now - owner.frozen_at > SESSION_MS)
        if not expired:
            return
        for inst in f.instances:
            if inst.awake(self.now) and inst is not owner and not inst.lost:
                add(("group gives the partition to {}", _reassign, inst))
        if self.healing and not any(i.alive for i in f.instances):
            add(("a new connector starts", lambda world, _: world.spawn(), None))

    def operator_may_act(self, key: str) -> bool:
        state = self.processor.state(key)
        return state.phase is Phase.NEEDS_OPERATOR and \
            (key, state.attempt, state.phase_since_ms) not in self.resolved and \
            self.now >= state.lease_until_ms + self.processor.policy.clock_skew_ms

    def _fault_actions(self, add: Callable[[Action], None]) -> None:
        b, f = self.budget, self.fleet
        alive = [i for i in f.instances if i.alive]
        if b["processor_crash"]:
            add(("FAULT processor crashes and restarts", _processor_crash, None))
        if b["processor_stall"]:
            add(("FAULT processor stalls (lag)", _processor_stall, None))
        for inst in alive:
            if b["connector_crash"]:
                add(("FAULT {} is killed", _kill, inst))
            if b["freeze"] and inst.awake(self.now):
                add(("FAULT {} freezes", _freeze, inst))
        if b["rebalance"] and f.owner is not None and len(alive) > 1:
            add(("FAULT rebalance", _rebalance, None))

    # --- shared helpers -------------------------------------------------------------------

    def kill(self, inst: Instance) -> None:
        """SIGKILL a connector; a new instance takes its place in the group."""
        self.fleet.crash(inst)
        self.spawn()

    def spawn(self) -> None:
        self.fleet.spawn(self.rng.randint(-self.cfg.max_skew_ms, self.cfg.max_skew_ms))

    def fault_for(self, operation: str) -> str:
        """The armed fault that hits this operation, or ""."""
        if self.healing:
            return ""
        for armed in self.armed[operation]:
            armed[1] = int(armed[1]) - 1  # type: ignore[call-overload]
            if armed[1] == 0:
                self.armed[operation].remove(armed)
                self.trace.append(f"FAULT {armed[0]}")
                return str(armed[0])
        return ""

    def lease_of(self, claim_id: str) -> int | None:
        for logged in self.processor.dispatch:
            g = logged.event
            if isinstance(g, ev.Grant) and g.claim_id == claim_id:
                return g.lease_until_ms
        # A fenced claim calls under its pre-granted Dispatch's lease, before any Grant.
        for logged in self.processor.log:
            c = logged.event
            if isinstance(c, ev.AttemptClaim) and c.claim_id == claim_id and c.fenced:
                return max((d.event.lease_until_ms for d in self.processor.dispatch
                            if isinstance(d.event, ev.Dispatch) and d.event.key == c.key
                            and d.event.attempt == c.attempt), default=0) or None
        return None

    def tick(self) -> None:
        """The processor's Tick, when a deadline has come (the real processor ticks every
        second whether or not one has; only the ones that fire a timer matter here)."""
        policy = self.processor.policy
        if any((d := due_ms(s, policy)) is not None and d <= self.now
               for s in self.processor.states.values()):
            self.processor.append(ev.Tick(0, "sim", self.now), self.now)

    def instants(self) -> list[int]:
        """The coming instants at which something is due: timeouts, lease ends, wake-ups,
        deadlines, the end of a pause."""
        now, timeout_ms = self.now, int(self.fleet.options.call_timeout_s * 1000)
        found = [self.stalled_until]
        for w in self.fleet.wire:
            found += [w.held_until, w.lease_until, w.sent_at + timeout_ms - w.inst.skew_ms]
        for inst in self.fleet.instances:
            found.append(inst.frozen_until)
            wake = inst.core.next_wake_ms()
            if wake is not None:
                found.append(wake - inst.skew_ms)
        policy = self.processor.policy
        for state in self.processor.states.values():
            due = due_ms(state, policy)
            found += [state.lease_until_ms, state.lease_until_ms + policy.clock_skew_ms,
                      due or 0]
        return sorted({t for t in found if t > now})


# --- the actions (each takes the world and its argument) ------------------------------------


def _intent(key: str, n: int, variant: int) -> ev.Intent:
    args = {"amount": 100 * variant, "to": "cust-1"}
    return ev.Intent(f"intent-{n}", key, "acme", "pay", TARGET, canonical_json(args),
                     args_hash(args), ev.Workflow("g", "1.0"), 0)


def _submit(world: World, _: object) -> None:
    intent = world.todo.pop(world.rng.randrange(len(world.todo)))
    world.processor.append(intent, world.now)


def _decide(world: World, _: object) -> None:
    """Decide the next record; commit sometimes (a crash replays what was not committed),
    and always once caught up while healing."""
    p = world.processor
    p.step(world.now)
    if (not p.behind()) if world.healing else world.rng.random() < 0.3:
        p.commit()


def _time_passes(world: World, _: object) -> None:
    """A random step, or to (just around) one of the next instants something is due:
    timing races hide in those instants, so landing on them makes them likely."""
    instants = world.instants() if world.rng.random() < 0.6 else []
    if instants:
        at = world.rng.choice(instants[:3]) + world.rng.choice((-1, 0, 0, 1))
        world.now += max(1, at - world.now)
    else:
        world.now += world.rng.choice(STEPS)
    world.tick()


def _told_lost(world: World, inst: Instance) -> None:
    inst.lost = False
    inst.outbox.extend(inst.core.revoked([0], inst.clock(world.now)))


def _read(world: World, inst: Instance) -> None:
    world.fleet.read(inst, world.processor.dispatch, world.now)


def _wake(world: World, inst: Instance) -> None:
    inst.outbox.extend(inst.core.tick(inst.clock(world.now)))


def _take(world: World, inst: Instance) -> None:
    cmd = inst.outbox[0]
    fleet = world.fleet
    if _dies_before(world, inst, cmd):
        return
    last = fleet.wire[-1] if fleet.wire else None
    fleet.take(inst, world.now, world.fault_for("fence") if isinstance(cmd, Fence) else "")
    if not fleet.wire or fleet.wire[-1] is last:
        return  # nothing went on the wire (a commit, a stop, a call not started)
    w = fleet.wire[-1]
    if isinstance(cmd, Produce):
        w.fault = world.fault_for("produce")
        if w.fault == "produce_delay":  # slow network: it arrives late, but it arrives
            w.fault, w.held_until = "", world.now + world.rng.choice(PAUSES)
    elif isinstance(cmd, Call):
        w.fault = world.fault_for("call")
        if w.fault == "before_call":
            world.kill(inst)  # granted, lease checked, nothing sent
        elif w.fault == "freeze_in_window":
            # The process pauses right after its last lease check, before the request
            # leaves: the one window no lease closes (docs/design.md).
            w.fault, w.frozen_window = "", True
            pause = world.rng.choice(PAUSES + (6_000, 10_000))  # long enough to be overtaken
            inst.frozen_at, inst.frozen_until = world.now, world.now + pause
        else:
            network.send(world, w)  # the check and the send follow each other at once


def _dies_before(world: World, inst: Instance, cmd: object) -> bool:
    """The failpoints before a command: the process is killed and replaced."""
    point = ""
    if isinstance(cmd, Produce) and isinstance(cmd.event, ev.AttemptClaim):
        point = world.fault_for("claim")
    elif isinstance(cmd, Produce) and isinstance(cmd.event, ev.AttemptOutcome):
        point = world.fault_for("outcome")
    if not point:
        return False
    world.kill(inst)
    return True


def _reassign(world: World, new: Instance) -> None:
    old = world.fleet.owner
    if old is not None:
        world.fleet.revoke(old, world.now)
    world.fleet.assign(new, len(world.processor.dispatch))


def _resolve(world: World, key: str) -> None:
    """The operator looks at the target itself. With the attempts used up, "not applied"
    would only bring the key back: the answer is then "failed"."""
    state = world.processor.state(key)
    world.resolved.add((key, state.attempt, state.phase_since_ms))
    found = world.target.lookup(key)
    used_up = state.counted_attempts >= world.processor.policy.max_attempts
    resolution = ev.Resolution.APPLIED if found else (
        ev.Resolution.FAILED if used_up else ev.Resolution.NOT_APPLIED)
    world.processor.append(ev.OperatorResolution(
        f"op-{len(world.resolved)}", key, state.attempt, resolution, "ops", world.now,
        found or ""), world.now)


def _processor_crash(world: World, _: object) -> None:
    world.budget["processor_crash"] -= 1
    world.processor.crash()


def _processor_stall(world: World, _: object) -> None:
    world.budget["processor_stall"] -= 1
    world.stalled_until = world.now + world.rng.choice(LAGS)


def _kill(world: World, inst: Instance) -> None:
    world.budget["connector_crash"] -= 1
    world.kill(inst)


def _freeze(world: World, inst: Instance) -> None:
    world.budget["freeze"] -= 1
    inst.frozen_at, inst.frozen_until = world.now, world.now + world.rng.choice(PAUSES)


def _rebalance(world: World, _: object) -> None:
    world.budget["rebalance"] -= 1
    f = world.fleet
    others = [i for i in f.instances if i.alive and i is not f.owner and not i.lost]
    if others:
        _reassign(world, world.rng.choice(others))
