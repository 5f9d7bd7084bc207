"""One soak from start to verdict: start the world, run the load while the scheduler fires
the planned faults, heal, wait for every key to settle, check, stop everything by PID."""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from ledger_lab.chaos.checker import (
    WAITING_WITHOUT_ALERT,
    FaultAt,
    Verdict,
    check,
    read_journals,
    target_truth,
)
from ledger_lab.chaos.faults import Deferred, FaultRecord, inject
from ledger_lab.chaos.options import ChaosOptions
from ledger_lab.chaos.plan import PlannedFault, plan_faults
from ledger_lab.chaos.world import EFFECT_TABLE, World
from ledger_lab.falsify.evidence import LedgerTopics
from ledger_lab.harness.approvers import TEST_APPROVER, trusted

PROGRESS_EVERY_S = 10.0
SETTLE_POLL_S = 5.0
AGENT_EXIT_S = 60.0
DEFER_S = 1.0  # a fault that cannot fire yet is tried again this much later


@dataclass
class SoakResult:
    options: ChaosOptions
    verdict: Verdict
    faults: list[FaultRecord] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    load_s: float = 0.0
    settle_s: float = 0.0
    start_seconds: dict[str, list[float]] = field(default_factory=dict)

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
                        "agents": self.options.agents, "guarantee": self.options.guarantee},
            "load_s": round(self.load_s, 1),
            "settle_s": round(self.settle_s, 1),
            # Intents the ledger took (on the intents topic) per second of load: the agents
            # submit for exactly the soak's duration, and fall behind the asked rate while
            # they are down (agent kills) or all their submits wait (a stalled ledger).
            "rate_held": round(taken / self.options.duration_s, 2),
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
    world = World(options, workdir, say)
    faults: list[FaultRecord] = []
    try:
        world.start()
        say(f"load: {options.rate:g} intents/s from {options.agents} agents for "
            f"{options.duration_s:g} s, {len(plan)} faults planned (seed {options.seed})")
        rng = random.Random(options.seed)
        started = time.monotonic()
        world.start_agents(time.time() + options.duration_s)
        pending, next_progress = list(plan), PROGRESS_EVERY_S
        while (elapsed := time.monotonic() - started) < options.duration_s:
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
        injected = [FaultAt(f.at_ms, f.kind, f.victim) for f in faults if f.victim]
        verdict = _settle(world, options, injected, say)
        restarts = {m.name: m.restarts for m in world.members if m.restarts}
        slow_starts = {m.name: m.start_seconds for m in world.members if m.start_seconds}
        if after is not None:
            after(world, injected)
        return SoakResult(options, verdict, faults, restarts, load_s,
                          time.monotonic() - settle_started, slow_starts)
    finally:
        say("stopping every process the soak started")
        world.stop()


def _clear_target_faults(world: World) -> None:
    assert world.sandbox is not None
    with contextlib.suppress(OSError):  # down: a restart clears its faults anyway
        world.sandbox.clear_faults()


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
    topics = LedgerTopics.read_from(settings.kafka_bootstrap, settings)
    with psycopg.connect(world.effects_dsn) as conn:
        rows = conn.execute(f"select operation_key, amount from {EFFECT_TABLE}").fetchall()
    truth = target_truth(sandbox.ledger(), [(k, a) for k, a in rows])
    verdict = check(topics, truth, read_journals(world.journals), trusted(TEST_APPROVER),
                    faults)
    for crash in world.crashes:
        verdict.violate("process_crashed", crash.split(" ", 1)[0], crash)
    return verdict
