"""Everything the soak runs, each part a ``Member`` that can be killed, paused and started
again by PID: the Kafka nodes, the processors, the connectors, the two targets (the payments
sandbox and PostgreSQL) and the agents.

A member that is down and not held down by a fault is started again by ``World.supervise``
(so a target that crashed on an armed fault comes back, as under a real supervisor). Slow
starts (a broker, PostgreSQL, the sandbox) run in a thread of their own: the fault scheduler
never waits for them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from confluent_kafka.admin import AdminClient

from ledger_lab.chaos.checker import FaultAt
from ledger_lab.chaos.options import ChaosOptions
from ledger_lab.chaos.topics import Cut
from ledger_lab.harness.agents import PROCESSOR_ENV
from ledger_lab.harness.approvers import TEST_APPROVER, write_signing_key
from ledger_lab.harness.postgres import PostgresServer
from ledger_lab.harness.processes import Proc, start_processor
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import FAST
from ledger_lab.local_kafka import LocalCluster, ensure_jars, jar_cache
from ledger_lab.sandbox.faults import EXIT_CRASH_AFTER_COMMIT, EXIT_CRASH_BEFORE_COMMIT
from ledger_stream.config import Settings
from ledger_stream.kafka import topics

# How long stop() waits for a slow start under way (a broker restart waits for its own
# start, bounded by LocalCluster's timeouts) before it stops what runs.
START_WAIT_S = 120.0
EFFECT_TABLE = "credits"
EFFECT_SQL = (f"insert into {EFFECT_TABLE}(operation_key, amount) "
              "values (%(ledger_key)s, %(amount)s)")


@dataclass
class Member:
    """One part of the world. ``launch`` starts it (blocking until it runs), ``crash``
    SIGKILLs it, ``pid`` and ``running`` say what runs now."""

    name: str
    role: str  # processor | connector | agent | target | broker
    launch: Callable[[], object]
    crash: Callable[[], object]
    pid: Callable[[], int | None]
    running: Callable[[], bool]
    slow: bool = False  # launched in a thread of its own
    exit_code: Callable[[], int | None] = lambda: None  # of the last run, once it ended
    log: Callable[[], Path | None] = lambda: None  # of the current run (processes only)
    expected_exits: frozenset[int] = frozenset({0, -9})  # ours: done, or our SIGKILL
    held_until: float = 0.0  # a fault keeps it down (or paused) until this monotonic time
    paused: bool = False
    restarts: int = 0
    starting: bool = False
    _thread: threading.Thread | None = field(default=None, repr=False)

    start_seconds: list[float] = field(default_factory=list)  # slow starts, kill to running
    started_ms: list[int] = field(default_factory=list)  # when each start ended (Unix ms)

    def start(self) -> None:
        if not self.slow:
            self.launch()
            self.started_ms.append(int(time.time() * 1000))
            return
        self.starting = True
        began = time.monotonic()

        def body() -> None:
            try:
                self.launch()
                self.start_seconds.append(round(time.monotonic() - began, 1))
                self.started_ms.append(int(time.time() * 1000))
            finally:
                self.starting = False

        self._thread = threading.Thread(target=body, name=f"start-{self.name}", daemon=True)
        self._thread.start()

    def signal(self, signum: signal.Signals) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
            return True
        return False

    def wait_started(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)


class World:
    def __init__(self, options: ChaosOptions, workdir: Path,
                 say: Callable[[str], None]) -> None:
        self.options, self.workdir, self.say = options, workdir, say
        self.cluster = LocalCluster(workdir / "kafka", progress=lambda line: None)
        self.settings: Settings | None = None
        self.sandbox: SandboxProc | None = None
        self.postgres: PostgresServer | None = None
        self.effects_dsn = ""
        self.members: list[Member] = []
        self.journals: list[Path] = []
        self.until = 0.0  # agents stop at this Unix time (a phase moves it on)
        # Extra environment per member name (the version a rolling upgrade gave it), and
        # for every agent (the schemas its SDK reads and writes).
        self.env_of: dict[str, dict[str, str]] = {}
        self.agent_env: dict[str, str] = {}
        self.ledger_env: dict[str, str] = {}  # processors and connectors not in env_of
        self.layouts = [options.partitions]  # the partition counts grown through, in order
        self.cuts: list[Cut] = []  # where each growth's layout began (chaos/topics.py)
        # Graceful stops and the starts after them (operator phases), and the ledger's
        # cold start (the load's first intents), for the checker's causes of ``stalled``.
        self.operated: list[FaultAt] = []
        self.crashes: list[str] = []  # members that exited by themselves with an error
        self._admin: AdminClient | None = None
        self._n = 0

    # -- start -------------------------------------------------------------------------------

    def start(self) -> None:
        o = self.options
        base = Settings()
        libs = ensure_jars(jar_cache(base), base.kafka_version, progress=self.say)
        self.say(f"starting a {o.nodes}-node Kafka cluster")
        status = self.cluster.start(libs, base.kafka_version, nodes=o.nodes)
        assert status.bootstrap is not None
        self.settings = Settings(kafka_bootstrap=status.bootstrap, topic_prefix="chaos",
                                 partitions=o.partitions, replication_factor=min(o.nodes, 3))
        topics.require_matching(topics.create_topics(status.bootstrap, self.settings))
        for row in status.nodes:
            self._add_broker(row.node_id)
        self.say("starting the targets (payments sandbox, PostgreSQL)")
        self.sandbox = SandboxProc(self.workdir / "sandbox.db",
                                   latency_ms=o.target_latency_ms)
        self._add_sandbox()
        self.postgres = PostgresServer().start()
        self.effects_dsn = self.postgres.new_database()
        with psycopg.connect(self.effects_dsn, autocommit=True) as conn:
            conn.execute(f"create table {EFFECT_TABLE}(id serial primary key, "
                         "operation_key text not null, amount int not null)")
        self._add_postgres()
        self.say(f"starting {o.processors} processors, {o.connectors} connectors per target")
        for i in range(o.processors):
            self._add_proc(f"processor-{i + 1}", "processor", self._processor(i + 1))
        for i in range(o.connectors):
            for name, make in ((f"payments-connector-{i + 1}", self._payments),
                               (f"ledger-db-connector-{i + 1}", self._ledger_db)):
                self._add_proc(name, "connector", functools.partial(make, name=name))

    def start_agents(self, until: float) -> None:
        self.until = until
        self.extend_load(0.0)
        for i in range(self.options.agents):
            self._add_proc(f"agent-{i + 1}", "agent", self._agent(i + 1))

    def extend_load(self, seconds: float) -> None:
        """Move the agents' stop time on by ``seconds`` (a phase held the load that long);
        the file is replaced whole, so an agent never reads it half written."""
        self.until += seconds
        scratch = self.workdir / "until.tmp"
        scratch.write_text(f"{self.until:.3f}")
        scratch.replace(self.until_file)

    @property
    def until_file(self) -> Path:
        return self.workdir / "until"

    # -- members -----------------------------------------------------------------------------

    def _add(self, member: Member) -> Member:
        self.members.append(member)
        member.start()
        return member

    def _add_proc(self, name: str, role: str, make: Callable[[int], Proc]) -> None:
        box: dict[str, Proc] = {}

        def launch() -> None:
            self._n += 1
            box["proc"] = make(self._n)

        def crash() -> None:
            if "proc" in box:
                box["proc"].kill()

        def pid() -> int | None:
            return box["proc"].pid if "proc" in box and box["proc"].alive() else None

        self._add(Member(name, role, launch, crash, pid,
                         lambda: "proc" in box and box["proc"].alive(),
                         exit_code=lambda: box["proc"].popen.poll() if "proc" in box else None,
                         log=lambda: box["proc"].log if "proc" in box else None))

    def _add_broker(self, node_id: int) -> None:
        def pid() -> int | None:
            row = next(r for r in self.cluster.status().nodes if r.node_id == node_id)
            return row.pid if row.alive else None

        member = Member(f"broker-{node_id}", "broker",
                        lambda: None if pid() else self.cluster.restart_node(node_id),
                        lambda: self.cluster.kill_node(node_id), pid,
                        lambda: pid() is not None, slow=True)
        self.members.append(member)  # already running

    def _add_sandbox(self) -> None:
        sandbox = self.sandbox
        assert sandbox is not None
        self.members.append(Member(
            "payments-sandbox", "target", sandbox.restart, sandbox.kill,
            lambda: sandbox.pid if sandbox.alive() else None, sandbox.alive, slow=True,
            exit_code=sandbox.exit_code,
            expected_exits=frozenset({0, -9, EXIT_CRASH_BEFORE_COMMIT, EXIT_CRASH_AFTER_COMMIT})))

    def _add_postgres(self) -> None:
        server = self.postgres
        assert server is not None

        def launch() -> None:
            if not server.running():
                server.restart()

        self.members.append(Member("postgres", "target", launch, server.kill,
                                   lambda: server.pid() if server.running() else None,
                                   server.running, slow=True))

    # -- process factories -------------------------------------------------------------------

    def _log(self, name: str, n: int) -> Path:
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        return logs / f"{name}-{n}.log"

    def version(self, name: str) -> dict[str, str]:
        """The environment that gives a processor or connector its version."""
        return self.env_of.get(name, self.ledger_env)

    def _processor(self, i: int) -> Callable[[int], Proc]:
        def make(n: int) -> Proc:
            assert self.settings is not None
            extra = ("--guarantee", self.options.guarantee)
            return start_processor(self.settings, self.workdir / f"state-{i}",
                                   self._log(f"processor-{i}", n), *extra,
                                   env={**PROCESSOR_ENV, **self.version(f"processor-{i}")})
        return make

    def _connector(self, kind: str, n: int, name: str, *args: str) -> Proc:
        """A connector whose claims name it ``<member>.<n>`` (the checker ties a key's
        claims to the faults of the member that held them)."""
        assert self.settings is not None and self.settings.kafka_bootstrap
        return Proc(["connector", kind, *args, "--instance-id", f"{name}.{n}",
                     "--bootstrap", self.settings.kafka_bootstrap,
                     "--topic-prefix", self.settings.topic_prefix],
                    self._log(f"connector-{kind}", n), env={**FAST, **self.version(name)})

    def _payments(self, n: int, name: str) -> Proc:
        assert self.sandbox is not None
        # No --deduplicates: the ledger alone keeps the target to one call per key.
        return self._connector("http", n, name, "--name", "payments", "--base-url",
                               self.sandbox.url)

    def _ledger_db(self, n: int, name: str) -> Proc:
        return self._connector("postgres", n, name, "--name", "ledger-db", "--dsn",
                               self.effects_dsn, "--effect-sql", EFFECT_SQL)

    def _agent(self, i: int) -> Callable[[int], Proc]:
        earlier: list[Path] = []  # this agent's journals, one per incarnation

        def make(n: int) -> Proc:
            assert self.settings is not None and self.settings.kafka_bootstrap
            incarnation = len(earlier) + 1
            journal = self.workdir / f"agent-{i}-{incarnation}.jsonl"
            # Seeded by the soak's seed, the agent and its incarnation only.
            seed = self.options.seed * 1000 + i * 100 + incarnation
            env = {**self.agent_env, "LEDGER_KAFKA_BOOTSTRAP": self.settings.kafka_bootstrap,
                   "LEDGER_TOPIC_PREFIX": self.settings.topic_prefix,
                   "LEDGER_APPROVAL_SIGNING_KEY": str(write_signing_key(TEST_APPROVER,
                                                                        self.workdir))}
            rate = self.options.rate / self.options.agents
            proc = Proc(["--journal", str(journal), "--name", f"a{i}-{incarnation}",
                         "--seed", str(seed), "--rate", f"{rate:g}",
                         "--until", f"{self.until:.3f}", "--until-file", str(self.until_file),
                         "--resume", *map(str, earlier)],
                        self._log(f"agent-{i}", n), env=env, module="ledger_lab.chaos.agent")
            earlier.append(journal)
            self.journals.append(journal)
            return proc
        return make

    # -- supervision -------------------------------------------------------------------------

    def by_role(self, role: str) -> list[Member]:
        return [m for m in self.members if m.role == role]

    def supervise(self) -> None:
        """Resume paused members whose hold ran out; start down members not held down
        (agents only until the load ends)."""
        now = time.monotonic()
        for member in self.members:
            if member.held_until > now or member.starting:
                continue
            if member.paused:
                member.signal(signal.SIGCONT)
                member.paused = False
            if member.role == "agent" and time.time() >= self.until:
                continue
            if not member.running():
                self._note_exit(member)
                member.restarts += 1
                member.start()

    def _note_exit(self, member: Member) -> None:
        code = member.exit_code()
        if code is not None and code not in member.expected_exits:
            self.crashes.append(f"{member.name} exited with status {code} by itself")

    def note_exits(self) -> None:
        """Record members that ended by themselves with an error and were not restarted
        (an agent after the load, anything at the end)."""
        for member in self.members:
            if not member.running() and not member.starting:
                self._note_exit(member)

    def heal(self, timeout_s: float) -> None:
        """Lift every hold and bring every member (but agents) back; wait for slow starts."""
        for member in self.members:
            member.held_until = 0.0
        self.supervise()
        for member in self.members:
            member.wait_started(timeout_s)

    def admin(self) -> AdminClient:
        """One admin client for the scheduler's metadata questions."""
        if self._admin is None:
            assert self.settings is not None and self.settings.kafka_bootstrap
            self._admin = AdminClient({"bootstrap.servers": self.settings.kafka_bootstrap})
        return self._admin

    def stop(self) -> None:
        """Stop everything the soak started, by PID (paused members are resumed first).
        Slow starts still under way are waited for first: a broker or target that came up
        after the stops below would be left running."""
        for member in self.members:
            member.wait_started(START_WAIT_S)
        for member in self.members:
            if member.paused:
                member.signal(signal.SIGCONT)
        for member in reversed(self.members):
            if member.role in ("agent", "connector", "processor") and member.running():
                with contextlib.suppress(Exception):
                    member.signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for member in self.members:
            while member.role in ("agent", "connector", "processor") and member.running() \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            if member.role in ("agent", "connector", "processor") and member.running():
                member.crash()
        if self.sandbox is not None and self.sandbox.alive():
            self.sandbox.stop()
        if self.postgres is not None:
            self.postgres.remove()
        self.cluster.stop()

