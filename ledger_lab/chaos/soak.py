"""One soak from start to verdict: start the world, run the load while the scheduler fires
the planned faults, heal, wait for every key to settle, check, stop everything by PID."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from ledger_lab.chaos.checker import (
    COLD_START,
    WAITING_WITHOUT_ALERT,
    FaultAt,
    Verdict,
    check,
    read_journals,
    target_truth,
)
from ledger_lab.chaos.faults import Deferred, FaultRecord, inject
from ledger_lab.chaos.options import ChaosOptions
from ledger_lab.chaos.phases import (
    PhaseRecord,
    Versions,
    run_growth,
    run_upgrade,
    wait_ready,
)
from ledger_lab.chaos.plan import PlannedFault, PlannedPhase, plan_faults, plan_phases
from ledger_lab.chaos.topics import ledger_topics
from ledger_lab.chaos.world import EFFECT_TABLE, Member, World
from ledger_lab.falsify.evidence import read_topics
from ledger_lab.harness.approvers import TEST_APPROVER, trusted
from ledger_stream.domain import events as ev
from ledger_stream.serde.schemas import default_schemas

PROGRESS_EVERY_S = 10.0
SETTLE_POLL_S = 5.0
AGENT_EXIT_S = 60.0
DEFER_S = 1.0  # a fault that cannot fire yet is tried again this much later
# The faults that take their victim down until the supervisor starts it again.
DOWN_KINDS = frozenset({"processor-kill", "connector-kill", "broker-kill", "target-kill"})


@dataclass
class SoakResult:
    options: ChaosOptions
    verdict: Verdict
    faults: list[FaultRecord] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    load_s: float = 0.0
    settle_s: float = 0.0
    start_seconds: dict[str, list[float]] = field(default_factory=dict)
    phases: list[PhaseRecord] = field(default_factory=list)
    dlq: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    def as_dict(self) -> dict[str, Any]:
        fired = [f for f in self.faults if f.victim]
        taken = self.verdict.figures.get("intents_on_topic", 0)
        return {
            "ok": self.ok,
            "seed": self.options.seed,
            "options": {"duration_s": self.options.duration_s, "rate": self.options.rate,
                        "faults": self.options.faults, "kinds": list(self.options.kinds),
                        "nodes": self.options.nodes, "processors": self.options.processors,
                        "connectors_per_target": self.options.connectors,
                        "agents": self.options.agents, "guarantee": self.options.guarantee,
                        "partitions": self.options.partitions,
                        "grow_by": self.options.grow_by, "grow_at": self.options.grow_at,
                        "upgrade": self.options.upgrade,
                        "upgrade_at": self.options.upgrade_at},
            "load_s": round(self.load_s, 1),
            "settle_s": round(self.settle_s, 1),
            # Intents the ledger took (on the intents topic) per second of load: the agents
            # submit for the soak's duration plus its phases, and fall behind the asked
            # rate while they are down (agent kills), held (the growth phase) or all their
            # submits wait (a stalled ledger).
            "rate_held": round(taken / max(self.load_s, 1.0), 2),
            "phases_s": round(sum(p.seconds for p in self.phases), 1),
            "phases": [p.__dict__ for p in self.phases],
            "dlq_records": len(self.dlq),
            "dlq": self.dlq[:20],
            "faults_injected": len(fired),
            "faults_by_kind": dict(sorted(Counter(f.kind for f in fired).items())),
            "faults_not_fired": [f.__dict__ for f in self.faults if not f.victim],
            "fault_log": [f.__dict__ for f in fired],
            "restarts": self.restarts,
            "seconds_to_start_again": self.start_seconds,
            **self.verdict.figures,
            "violations": self.verdict.violations,
            "alerted_duplicate_windows": self.verdict.windows,
        }


def run_soak(options: ChaosOptions, workdir: Path, say: Callable[[str], None],
             after: Callable[[World, list[FaultAt]], None] | None = None) -> SoakResult:
    """The soak's result; ``after`` (tests) runs on the settled world (and the faults that
    fired) before it stops."""
    plan = plan_faults(options.seed, options.duration_s, options.faults, options.kinds)
    phases = plan_phases(options.duration_s, options.grow_by, options.grow_at,
                         options.upgrade, options.upgrade_at)
    world = World(options, workdir, say)
    versions = _versions(world, workdir) if options.upgrade else None
    faults: list[FaultRecord] = []
    done: list[PhaseRecord] = []
    try:
        world.start()
        # The load starts on a ready ledger: a loaded machine takes many seconds to start
        # a process, and a phase must not stop members that never started.
        wait_ready(world, world.by_role("processor") + world.by_role("connector"))
        say(f"load: {options.rate:g} intents/s from {options.agents} agents for "
            f"{options.duration_s:g} s, {len(plan)} faults planned (seed {options.seed}), "
            f"phases: {', '.join(f'{p.kind} at {p.at_s:g} s' for p in phases) or 'none'}")
        rng = random.Random(options.seed)
        began = time.monotonic()
        world.start_agents(time.time() + options.duration_s)
        # The soak's clock starts with the first intents: on a loaded machine an agent
        # process takes many seconds to start, and a phase must find keys to move.
        # The ledger's first work begins its cold start: a cause of ``stalled`` (checker).
        world.operated.append(FaultAt(_wait_first_intents(world), COLD_START, "ledger"))
        started = time.monotonic()
        world.extend_load(started - began)
        pending, next_progress, held_s = list(plan), PROGRESS_EVERY_S, 0.0
        waiting = list(phases)
        while (elapsed := time.monotonic() - started - held_s) < options.duration_s:
            if waiting and waiting[0].at_s <= elapsed:
                took = _phase(world, waiting.pop(0), elapsed, versions, done, say)
                held_s += took
                world.extend_load(took)  # the agents submit the soak's duration besides
                continue
            due = [f for f in pending if f.at_s <= elapsed]
            for fault in due:
                pending.remove(fault)
                try:
                    record = inject(world, fault.kind, rng, elapsed)
                except Deferred:
                    pending.append(PlannedFault(elapsed + DEFER_S, fault.kind))
                    continue
                faults.append(record)
                say(f"{record.at_s:7.1f} s  {record.kind:<15} {record.victim or '-'}  "
                    f"{record.detail}")
            world.supervise()
            if elapsed >= next_progress:
                next_progress += PROGRESS_EVERY_S
                fired = sum(1 for f in faults if f.victim)
                say(f"{elapsed:7.1f} s  {fired} faults so far")
            time.sleep(0.1)
        faults += [FaultRecord(f.at_s, f.kind, "", "deferred until the load ended")
                   for f in pending]
        load_s = time.monotonic() - started
        say("load ended: healing every member and waiting for every key to settle")
        _clear_target_faults(world)  # first: an armed crash fault could fire while healing
        world.heal(120)
        _clear_target_faults(world)
        _wait_agents(world)
        world.note_exits()
        settle_started = time.monotonic()
        injected = until_back([FaultAt(f.at_ms, f.kind, f.victim) for f in faults
                               if f.victim], world.members)
        injected = sorted(injected + world.operated, key=lambda f: f.at_ms)
        verdict = _settle(world, options, injected, say)
        dlq = read_dlq(world)
        for letter in dlq:
            verdict.violate("dead_letter", letter["key"], letter["why"])
        for phase in done:
            if phase.kind == "growth" and not phase.detail.get("grown"):
                verdict.violate("phase_failed", "growth",
                                f"repartition never succeeded: {phase.detail}")
        restarts = {m.name: m.restarts for m in world.members if m.restarts}
        slow_starts = {m.name: m.start_seconds for m in world.members if m.start_seconds}
        if after is not None:
            after(world, injected)
        return SoakResult(options, verdict, faults, restarts, load_s,
                          time.monotonic() - settle_started, slow_starts, done, dlq)
    finally:
        say("stopping every process the soak started")
        world.stop()
        if versions is not None:
            _restore_schemas()


def _versions(world: World, workdir: Path) -> Versions:
    """Start the ledger at the old version; the agents' SDK (upgraded first, as the
    operations guide says) reads both and writes the old schemas; the checker reads both."""
    versions = Versions(workdir)
    world.ledger_env = versions.old
    world.agent_env = versions.bridge
    _SAVED.update({k: os.environ.get(k) for k in ("LEDGER_SCHEMA_DIR", "LEDGER_WRITE_SCHEMAS")})
    os.environ["LEDGER_SCHEMA_DIR"] = str(versions.new_dir)
    os.environ.pop("LEDGER_WRITE_SCHEMAS", None)
    default_schemas.cache_clear()
    return versions


_SAVED: dict[str, str | None] = {}


def _restore_schemas() -> None:
    for name, value in _SAVED.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    default_schemas.cache_clear()


def _phase(world: World, phase: PlannedPhase, elapsed: float, versions: Versions | None,
           done: list[PhaseRecord], say: Callable[[str], None]) -> float:
    """Run one phase (faults wait); the seconds it held the soak."""
    began = time.monotonic()
    settings = world.settings
    assert settings is not None
    say(f"{elapsed:7.1f} s  phase {phase.kind} begins")
    if phase.kind == "growth":
        record = run_growth(world, settings.partitions + world.options.grow_by, elapsed)
    else:
        assert versions is not None
        record = run_upgrade(world, versions, elapsed, world.supervise)
    record.detail["began_unix"] = round(time.time() - (time.monotonic() - began), 1)
    done.append(record)
    say(f"{elapsed:7.1f} s  phase {phase.kind} took {record.seconds:g} s: "
        f"{ {k: v for k, v in record.detail.items() if k != 'replacements'} }")
    return time.monotonic() - began


def until_back(faults: list[FaultAt], members: list[Member]) -> list[FaultAt]:
    """Each fault that took its victim down (a kill), with when it was back: the end of
    the victim's first start after it (a broker: running again, 17-40 s on a loaded
    machine, when the leadership of its partitions moves back to it)."""
    started = {m.name: m.started_ms for m in members}
    back = []
    for fault in faults:
        after = [ms for ms in started.get(fault.victim, []) if ms > fault.at_ms]
        if fault.kind in DOWN_KINDS and after:
            fault = dataclasses.replace(fault, until_ms=min(after))
        back.append(fault)
    return back


def read_dlq(world: World) -> list[dict[str, Any]]:
    """Every committed dead letter: where its input was and the reason the ledger gave."""
    settings = world.settings
    assert settings is not None and settings.kafka_bootstrap
    name = settings.topic("dlq")
    return [{"key": (d.key or b"").decode(errors="replace"),
             "why": f"{d.topic}[{d.partition}]@{d.offset}: {d.reason}"}
            for d in read_topics(settings.kafka_bootstrap, [name])[name]
            if isinstance(d, ev.DeadLetter)]


def _clear_target_faults(world: World) -> None:
    assert world.sandbox is not None
    with contextlib.suppress(OSError):  # down: a restart clears its faults anyway
        world.sandbox.clear_faults()


def _wait_first_intents(world: World, timeout_s: float = 120.0) -> int:
    """Until every agent journaled its first intent (or ``timeout_s``); when the first
    one was seen (Unix ms, to the 0.2 s poll): the ledger's first work."""
    deadline = time.monotonic() + timeout_s
    first_ms: int | None = None
    while time.monotonic() < deadline:
        begun = [path.exists() and path.stat().st_size > 0 for path in world.journals]
        if any(begun) and first_ms is None:
            first_ms = int(time.time() * 1000)
        if all(begun):
            break
        world.supervise()
        time.sleep(0.2)
    return first_ms if first_ms is not None else int(time.time() * 1000)


def _wait_agents(world: World) -> None:
    deadline = time.monotonic() + AGENT_EXIT_S
    for agent in world.by_role("agent"):
        while agent.running() and time.monotonic() < deadline:
            time.sleep(0.2)
        if agent.running():
            agent.crash()


def _settle(world: World, options: ChaosOptions, faults: list[FaultAt],
            say: Callable[[str], None]) -> Verdict:
    """Check until no key is unsettled (or the settle time ran out): the last verdict."""
    deadline = time.monotonic() + options.settle_s
    while True:
        world.supervise()
        verdict = check_world(world, faults)
        # Also asked again: an operator-queue receipt read before its alert (a transaction's
        # commit markers reach the receipts and alerts partitions one after the other).
        waiting = [v for v in verdict.violations if v["kind"] in ("unsettled", "unanswered")
                   or v["why"].startswith(WAITING_WITHOUT_ALERT)]
        if not waiting or time.monotonic() > deadline:
            return verdict
        say(f"{len(waiting)} keys or intents not settled yet, e.g. {waiting[0]}")
        time.sleep(SETTLE_POLL_S)


def check_world(world: World, faults: list[FaultAt]) -> Verdict:
    """The checker's verdict on the world as it is now (its targets and topics), with the
    members that crashed by themselves."""
    settings, sandbox = world.settings, world.sandbox
    assert settings is not None and settings.kafka_bootstrap and sandbox is not None
    topics = ledger_topics(settings.kafka_bootstrap, settings.topic, world.layouts,
                           world.cuts)
    with psycopg.connect(world.effects_dsn) as conn:
        rows = conn.execute(f"select operation_key, amount from {EFFECT_TABLE}").fetchall()
    truth = target_truth(sandbox.ledger(), [(k, a) for k, a in rows])
    verdict = check(topics, truth, read_journals(world.journals), trusted(TEST_APPROVER),
                    faults)
    for crash in world.crashes:
        verdict.violate("process_crashed", crash.split(" ", 1)[0], crash)
    return verdict
