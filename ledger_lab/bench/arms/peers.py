"""Peers: the same protected payment through ledger-stream and through the libraries a user
would pick instead (:mod:`.peers_libs`), side by side in one run.

One payments sandbox (``call_ms`` per call) serves every contestant. Each takes the business
key as its idempotency key and keeps it in a durable store: ledger-stream's ``submit``
through the processor (exactly once) and the HTTP connector; effect-ledger on SQLite;
agent-ledger and idemkit on PostgreSQL; DBOS on SQLite and on PostgreSQL. The PostgreSQL
server is a throwaway one (the pg arms') with ``fsync`` on, a new database per run.

At each concurrency in ``levels`` (agents are threads of one process): ``calls`` fresh
payments, then the same ``calls`` again as duplicates of settled keys. Latency p50/p99 in ms
and effects per second over each batch's wall time. Every contestant runs at every level
before the next repetition (interleaved, the starting contestant rotating); the figures are
medians over ``repeats``. A call that raises is what the agent got: counted per run (with
the first error's text), not retried, and left out of the latencies and rates. After every
run the sandbox's ledger must hold one effect per key whose payment succeeded and never more
than one per key (a duplicate effect stops the arm).

Figures are named ``<contestant>_<agents>_<fresh|duplicate>_<p50_ms|p99_ms|per_s>``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ledger_lab.bench.arms.connector import CONNECTOR_ENV
from ledger_lab.bench.arms.peers_client import WARM_UP_CALLS, body
from ledger_lab.bench.arms.peers_client import measure as measure_calls
from ledger_lab.bench.arms.peers_libs import POSTGRES_PEERS
from ledger_lab.bench.arms.peers_plan import LEDGER, PeersPlan
from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.processes import peak_rss_mb, throwaway_approver_env
from ledger_stream.config import Settings

Say = Callable[[str], None]
CHILD_TIMEOUT_S = 900


class _LedgerContestant:
    """ledger-stream's side: a processor, the HTTP connector at the sandbox, one client."""

    def __init__(self, bootstrap: str, prefix: str, folder: Path, sandbox_url: str) -> None:
        from ledger_lab.harness.stack import Stack
        from ledger_stream import LedgerClient, Workflow
        from ledger_stream.kafka import topics

        s = Settings(kafka_bootstrap=bootstrap, topic_prefix=prefix, partitions=3,
                     replication_factor=1)
        topics.require_matching(topics.create_topics(bootstrap, s))
        folder.mkdir(parents=True, exist_ok=True)
        self.stack = Stack(s, folder, processor_env={
            **throwaway_approver_env(), "LEDGER_PROCESSING_GUARANTEE": "exactly-once"})
        try:
            self.connector = self.stack.connector(
                "http", "--name", "payments", "--base-url", sandbox_url, env=CONNECTOR_ENV)
            self.client = LedgerClient(s)
        except BaseException:
            self.stack.close()
            raise
        self.workflow = Workflow("bench-peers", "1.0", "thread", "payment")

    def call(self, key: str, payment: dict[str, Any]) -> object:
        from ledger_stream import operation_key

        intent = self.client.intent(operation_key("acme", "refund", key), "refund",
                                    "payments", payment, workflow=self.workflow)
        return self.client.submit(intent, wait=60)

    def warm(self, effects: int, say: Say) -> None:
        """``effects`` fresh payments at 64 agents, not measured (the broker's warm-up)."""
        from ledger_lab.bench.arms.peers_client import concurrently

        if effects <= 0:
            return
        say(f"warming the broker: {effects} fresh payments through ledger-stream, "
            f"not measured")
        token = f"w{uuid.uuid4().hex[:10]}"
        _, rate, failed = concurrently(64, effects,
                                       lambda i: self.call(f"{token}-{i}", body(i)))
        say(f"warmed at {rate:.0f} effects/s ({len(failed)} calls failed)")

    def processes(self) -> list[Any]:
        return [self.stack.processor, self.connector]

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            self.stack.close()


def _one_run(who: str, ledger: _LedgerContestant | None, url: str, folder: Path,
             server: Any, agents: int, calls: int, token: str) -> dict[str, Any]:
    if who == LEDGER:
        assert ledger is not None
        figures, errors = measure_calls(ledger.call, token, agents, calls)
        return {**figures, "errors": errors}
    dsn = server.new_database() if who in POSTGRES_PEERS else ""
    return _run_peer(who, url, folder / f"{who}-{token}", dsn, agents, calls, token)


def _run_peer(peer: str, sandbox_url: str, folder: Path, dsn: str, agents: int, calls: int,
              token: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "ledger_lab.bench.arms.peers_client", "--peer", peer,
            "--url", sandbox_url, "--folder", str(folder), "--dsn", dsn,
            "--agents", str(agents), "--calls", str(calls), "--token", token]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise BenchError(f"peer {peer} at {agents} agents failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def durable_postgres() -> Any:
    """A throwaway PostgreSQL server (the pg arms') made durable for the peers: ``fsync`` on
    (the test server runs without it) and room for 64 agents' pools at once."""
    import psycopg

    from ledger_lab.harness.postgres import PostgresServer

    server = PostgresServer().start()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET fsync = on")
            conn.execute("ALTER SYSTEM SET synchronous_commit = on")
            conn.execute("ALTER SYSTEM SET max_connections = 300")
        server.restart()
        with psycopg.connect(server.dsn) as conn:
            row = conn.execute("SHOW fsync").fetchone()
        if row is None or row[0] != "on":
            raise BenchError(f"PostgreSQL for the peers: fsync is {row}, not on")
    except BaseException:
        server.remove()
        raise
    return server


def _effects(sandbox: Any) -> int:
    return len(sandbox.ledger()["effects"])


def measure(plan: PeersPlan, folder: Path, say: Say, bootstrap: str | None = None,
            prefix: str = "peers", postgres: Any = None
            ) -> tuple[dict[str, float], float, dict[str, Any]]:
    """(median figures of every contestant at every level, the highest peak RSS in MiB of
    a peer's process, ledger-stream's processor and connector, the errors agents got by
    ``<contestant>_<agents>``: counts per run and the first error's text)."""
    from ledger_lab.harness.sandbox import SandboxProc

    runs: dict[str, list[float]] = {}
    errors: dict[str, Any] = {}
    rss = 0.0
    sandbox = SandboxProc(folder / "sandbox.db", latency_ms=plan.call_ms)
    own_pg = postgres is None and any(p in POSTGRES_PEERS for p in plan.peers)
    server = durable_postgres() if own_pg else postgres
    ledger: _LedgerContestant | None = None
    try:
        if plan.ledger:
            if bootstrap is None:
                raise BenchError("ledger-stream's side of the peers arm needs Kafka")
            say("starting ledger-stream (processor, connector)")
            ledger = _LedgerContestant(bootstrap, prefix, folder / "ledger", sandbox.url)
            ledger.warm(plan.warm_up_effects, say)
        names = plan.contestants()
        for repetition in range(plan.repeats):
            for agents in plan.levels:
                calls = plan.calls(agents)
                start = repetition % len(names)
                for who in names[start:] + names[:start]:
                    say(f"{who} at {agents} agents ({repetition + 1}/{plan.repeats})")
                    token = f"p{uuid.uuid4().hex[:10]}"
                    before = _effects(sandbox)
                    try:
                        got = _one_run(who, ledger, sandbox.url, folder, server, agents,
                                       calls, token)
                    except BenchError as exc:  # the peer's process failed: a result too
                        errors.setdefault(f"{who}_{agents}", []).append(
                            {"run_failed": str(exc)[-1500:]})
                        continue
                    rss = max(rss, float(got.pop("peak_rss_mb", 0.0)))
                    failed = got.pop("errors")
                    if failed:
                        errors.setdefault(f"{who}_{agents}", []).append(failed)
                    made, expected = _effects(sandbox) - before, calls + WARM_UP_CALLS
                    lost = failed.get("fresh_errors", 0)
                    if not expected - lost <= made <= expected:  # never a key paid twice
                        raise BenchError(f"{who}: {made} effects at the target for "
                                         f"{expected} keys ({lost} calls failed)")
                    for figure, value in got.items():
                        if isinstance(value, float | int):
                            runs.setdefault(f"{who}_{agents}_{figure}", []).append(value)
    finally:
        if ledger is not None:
            rss = max(rss, *(peak_rss_mb(p.pid) for p in ledger.processes()))
            ledger.close()
        sandbox.stop()
        if own_pg and server is not None:
            server.remove()
    medians = {name: statistics.median(values) for name, values in runs.items()}
    return medians, rss, errors


def leaders(figures: dict[str, float], names: Sequence[str], levels: Sequence[int]
            ) -> dict[str, str]:
    """Who is ahead on each figure at each level: lowest latency, highest rate."""
    out = {}
    for agents in levels:
        for kind in ("fresh", "duplicate"):
            for stat, best in (("p50_ms", min), ("p99_ms", min), ("per_s", max)):
                scored = {n: figures[f"{n}_{agents}_{kind}_{stat}"] for n in names
                          if f"{n}_{agents}_{kind}_{stat}" in figures}
                if scored:
                    out[f"{agents}_{kind}_{stat}"] = best(scored, key=scored.__getitem__)
    return out


class PeersArm:
    name = "peers"
    repeated = False

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        plan = ctx.sizes.peers
        total = plan.repeats * len(plan.levels) * len(plan.contestants()) + 1
        done = [0]

        def say(line: str) -> None:
            ctx.progress(f"{self.name}: {line}", done[0], total)
            done[0] += 1

        figures, rss, errors = measure(plan, ctx.folder("peers"), say, ctx.bootstrap,
                                       f"{ctx.prefix}-peers")
        return ArmResult(self.name, repetition, figures, rss,
                         {"levels": list(plan.levels), "repeats": plan.repeats,
                          "calls": {str(a): plan.calls(a) for a in plan.levels},
                          "call_ms": plan.call_ms, "contestants": list(plan.contestants()),
                          "ahead": leaders(figures, plan.contestants(), plan.levels),
                          "payment": body(0), "errors": errors})


def markdown(figures: dict[str, float], names: Sequence[str], levels: Sequence[int]) -> str:
    """The figures as one Markdown table: a row per contestant and level."""
    lines = ["| agents | contestant | fresh p50 / p99 ms | fresh effects/s | "
             "duplicate p50 / p99 ms | duplicates/s |",
             "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for agents in levels:
        for n in names:
            f = {k.removeprefix(f"{n}_{agents}_"): v for k, v in figures.items()
                 if k.startswith(f"{n}_{agents}_")}
            if f:
                lines.append(
                    f"| {agents} | {n} | {f['fresh_p50_ms']:.1f} / {f['fresh_p99_ms']:.1f} | "
                    f"{f['fresh_per_s']:,.0f} | {f['duplicate_p50_ms']:.2f} / "
                    f"{f['duplicate_p99_ms']:.1f} | {f['duplicate_per_s']:,.0f} |")
    return "\n".join(lines)
