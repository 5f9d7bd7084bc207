"""The soak's operator phases, run as an operator would, under the agents' load.

- ``growth``: grow every ledger topic to more partitions through the real
  ``ledger-stream repartition --to N``. It refuses while an input partition holds a record
  the processors did not decide, so the agents are held (SIGSTOP: each agent's submits wait
  in it, none is dropped) for the window from the drain to the cut-over; the connectors
  and then the processors are stopped with SIGTERM, and started again once the new layout
  is recorded. A refusal for undecided inputs is answered as the operations guide says
  (start the processors, let them decide, stop them, run it again); any other refusal or
  failure by running it again a little later (it is safe to repeat).
- ``upgrade``: a rolling upgrade to the "other version" (this code with schemas that add a
  field to every event, as the rolling-upgrade test plays it; ``Versions``): each processor and
  connector, one at a time, stopped with SIGTERM and replaced by its successor, in two
  passes (first writing the release's schemas, then its own). The agents keep submitting.

Every graceful stop must exit 0: any other status is recorded as a crash (a violation).
Faults do not fire while a phase runs; the agents' stop time moves on by the phase's length.
"""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_lab.chaos.checker import FaultAt
from ledger_lab.chaos.topics import cut_at_growth
from ledger_lab.chaos.world import Member, World
from ledger_lab.harness.processes import processor_group
from ledger_stream.serde.schemas import RELEASED, SCHEMA_DIR

STOP_S = 30.0  # a graceful stop longer than this is a SIGKILL (and recorded)
READY_S = 90.0  # a successor must log that it started within this (a loaded machine)
REPARTITION_TRIES = 10
DRAIN_S = 10.0  # processors deciding the inputs that waited, before a try again
UNDECIDED = "inputs not decided"  # repartition's refusal that the processors answer
HOLD = float("inf")
ADDED_FIELD = {"name": "soak_rollout_note", "type": "string", "default": "",
               "doc": "Added by the soak's rolling upgrade; read by both versions."}


@dataclass
class PhaseRecord:
    kind: str
    at_s: float  # seconds of ordinary load before it
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


class Versions:
    """The two versions of a rolling upgrade, as environments. The old one is this build
    (its packaged schemas); the new one is this build with every schema plus
    ``ADDED_FIELD``, this build's schemas kept alongside as the release ``OLD`` (and the
    packaged releases and history too), so it reads both and can write the old ones.

    The old version is this build rather than the last published release: that release's
    Intent schema has no approval ``key_id``, so an SDK writing it drops the key id of every
    Ed25519 approval and every approved refund is rejected (the soak found it: 0 effects at
    the payments target). Such approvals can only be used once no instance writes the
    release's schemas."""

    OLD = "this-build"

    def __init__(self, workdir: Path) -> None:
        self.new_dir = workdir / "schemas-new"
        if not self.new_dir.exists():
            self._write_new()

    def _write_new(self) -> None:
        self.new_dir.mkdir(parents=True)
        for path in SCHEMA_DIR.glob("*.avsc"):
            raw = json.loads(path.read_text())
            raw["fields"].append(ADDED_FIELD)
            (self.new_dir / path.name).write_text(json.dumps(raw))
        kept = [(p, Path(RELEASED) / self.OLD / p.name) for p in SCHEMA_DIR.glob("*.avsc")]
        kept += [(p, p.relative_to(SCHEMA_DIR)) for folder in (RELEASED, "history")
                 for p in (SCHEMA_DIR / folder).rglob("*.avsc")]
        for source, relative in kept:
            (self.new_dir / relative).parent.mkdir(parents=True, exist_ok=True)
            (self.new_dir / relative).write_text(source.read_text())

    @property
    def old(self) -> dict[str, str]:
        return {"LEDGER_SCHEMA_DIR": str(SCHEMA_DIR)}

    @property
    def bridge(self) -> dict[str, str]:
        """The new version writing the old version's schemas: old instances read it."""
        return {"LEDGER_SCHEMA_DIR": str(self.new_dir), "LEDGER_WRITE_SCHEMAS": self.OLD}

    @property
    def new(self) -> dict[str, str]:
        return {"LEDGER_SCHEMA_DIR": str(self.new_dir)}


def _ledger(world: World) -> list[Member]:
    return [m for m in world.members if m.role in ("processor", "connector")]


def _resume(member: Member) -> None:
    if member.paused:
        member.signal(signal.SIGCONT)
        member.paused = False


def _operated(world: World, member: Member, started: bool = False) -> None:
    """Note a graceful stop, or the start after it (``started``: the stop before it then
    lasted until now), for the checker's causes."""
    now, kind = int(time.time() * 1000), f"{member.role}-stop"
    if started:
        world.operated[:] = [dataclasses.replace(f, until_ms=now)
                             if (f.kind, f.victim, f.until_ms) == (kind, member.name, 0)
                             else f for f in world.operated]
    # A start is an instant (until now): a later start never extends it.
    world.operated.append(FaultAt(now, kind, member.name, now if started else 0))


def stop_gracefully(world: World, members: list[Member]) -> dict[str, int | None]:
    """SIGTERM each running member once it is ready, wait for all; their exit statuses
    (None: it was down, from an earlier fault). A member still running after ``STOP_S``
    is SIGKILLed; a status other than 0 is recorded as a crash."""
    running = [m for m in members if m.running()]
    for member in members:
        member.held_until = HOLD
        _resume(member)
    # One the supervisor just started again may still be starting: SIGTERM before its
    # handler is in place ends it by the signal (-15), which is no graceful stop.
    wait_ready(world, running)
    for member in running:
        if member.signal(signal.SIGTERM):
            _operated(world, member)
    deadline = time.monotonic() + STOP_S
    while any(m.running() for m in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    codes: dict[str, int | None] = {m.name: None for m in members}
    for member in running:
        if member.running():
            member.crash()
            world.crashes.append(f"{member.name} did not stop within {STOP_S:g} s of SIGTERM")
            time.sleep(0.2)
        codes[member.name] = member.exit_code()
        if codes[member.name] not in (0, None):
            world.crashes.append(f"{member.name} exited with status {codes[member.name]} "
                                 "on SIGTERM")
    return codes


def start_ready(world: World, members: list[Member]) -> float:
    """Start each member and wait until it logged that it started; the seconds it took."""
    began = time.monotonic()
    for member in members:
        member.start()
    wait_ready(world, members)
    for member in members:
        member.held_until = 0.0
        _operated(world, member, started=True)
    return round(time.monotonic() - began, 1)


def wait_ready(world: World, members: list[Member]) -> None:
    """Wait until each member logged that it started (its consumer made, its signal
    handlers in place), as an orchestrator's readiness check would; say who did not."""
    for member in members:
        word = f"{member.role} started"
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            log = member.log()
            if log is None and not member.starting:
                break  # no process log to read (not a process the world launched)
            if log is not None and log.exists() and word in log.read_text(errors="replace"):
                break
            if not member.running() and not member.starting:
                break  # exited at start: the supervisor records it and starts it again
            time.sleep(0.2)
        else:
            world.say(f"{member.name} did not log '{word}' within {READY_S:g} s")


def run_growth(world: World, to: int, at_s: float) -> PhaseRecord:
    """The growth phase (module docstring); the record says what moved and how long."""
    settings = world.settings
    assert settings is not None and settings.kafka_bootstrap
    began, record = time.monotonic(), PhaseRecord("growth", round(at_s, 1))
    agents = [m for m in world.by_role("agent") if m.running()]
    for agent in agents:
        agent.held_until = HOLD
        if agent.signal(signal.SIGSTOP):
            agent.paused = True
    connectors, processors = world.by_role("connector"), world.by_role("processor")
    stops = stop_gracefully(world, connectors)
    tries: list[str] = []
    for _ in range(REPARTITION_TRIES):
        # A processor not started again since the last try has nothing to stop: keep its
        # first stop's status.
        stops |= {k: v for k, v in stop_gracefully(world, processors).items() if k not in stops
                  or v is not None}
        done = _repartition(world, to)
        tries.append(done.stdout.strip().splitlines()[-1] if done.returncode == 0
                     else (done.stderr.strip().splitlines() or ["no output"])[-1])
        if done.returncode == 0:
            break
        world.say(f"repartition: {tries[-1]}")
        if UNDECIDED in tries[-1]:  # as the guide says: let them decide, try again
            start_ready(world, processors)
        # Otherwise (a stopped member still in the group until its session ends, a broker
        # away, or topics grown already by the failed try: a processor would refuse to
        # start on them) the same command again, a little later.
        time.sleep(DRAIN_S)
    grown = bool(tries) and tries[-1].startswith(("moved", "already"))
    if grown:  # the processors are stopped: what they committed was decided at the old count
        world.cuts.append(cut_at_growth(settings.kafka_bootstrap, settings.topic,
                                        processor_group(settings), settings.partitions))
        world.settings = settings.model_copy(update={"partitions": to})
        world.layouts.append(to)
    restart_s = start_ready(world, processors + connectors)
    for agent in agents:
        agent.held_until = 0.0
        if agent.paused:
            agent.signal(signal.SIGCONT)
            agent.paused = False
    record.seconds = round(time.monotonic() - began, 1)
    moved = re.match(r"moved (\d+) keys \((\d+) stay\)", tries[-1] if tries else "")
    record.detail = {"from": settings.partitions, "to": to, "grown": grown,
                     "moved_keys": int(moved[1]) if moved else None,
                     "kept_keys": int(moved[2]) if moved else None,
                     "repartition_tries": tries, "agents_held_s": record.seconds,
                     "graceful_stops": stops, "restart_s": restart_s}
    return record


def _repartition(world: World, to: int) -> subprocess.CompletedProcess[str]:
    """The real command line, as an operator runs it."""
    settings = world.settings
    assert settings is not None and settings.kafka_bootstrap
    return subprocess.run(
        [sys.executable, "-m", "ledger_stream.cli.main", "repartition", "--to", str(to),
         "--bootstrap", settings.kafka_bootstrap, "--topic-prefix", settings.topic_prefix,
         "--group", processor_group(settings)],
        capture_output=True, text=True, timeout=300, check=False)


def run_upgrade(world: World, versions: Versions, at_s: float,
                between: Callable[[], None]) -> PhaseRecord:
    """The rolling upgrade (module docstring): two passes over every processor and
    connector, one instance at a time; ``between`` runs after each replacement (the soak
    keeps the other members supervised)."""
    began, record = time.monotonic(), PhaseRecord("upgrade", round(at_s, 1))
    replaced: list[dict[str, Any]] = []
    for pass_name, env in (("bridge", versions.bridge), ("new", versions.new)):
        for member in _ledger(world):
            step = time.monotonic()
            code = stop_gracefully(world, [member])[member.name]
            world.env_of[member.name] = env
            ready_s = start_ready(world, [member])
            replaced.append({"member": member.name, "pass": pass_name, "exit": code,
                             "ready_s": ready_s, "s": round(time.monotonic() - step, 1)})
            between()
    record.seconds = round(time.monotonic() - began, 1)
    record.detail = {"from": f"{Versions.OLD} (packaged schemas)",
                     "to": f"{Versions.OLD} + {ADDED_FIELD['name']} on every event",
                     "replaced": len(replaced),
                     "replacements": replaced}
    return record
