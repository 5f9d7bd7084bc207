"""Refund-agent workers as real processes against a Stack (processor + sandbox connector)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger_lab.harness.approvers import TEST_APPROVER, approver_env, write_signing_key
from ledger_lab.harness.processes import Proc, processor_group
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings

# The processor trusts the test approver's public key only; the workers, which play the
# approval service in the example, are given its private key file.
PROCESSOR_ENV = {"LEDGER_APPROVAL_REQUIRED_ACTIONS": '["refund"]', **approver_env(TEST_APPROVER)}
REPO_ROOT = Path(__file__).resolve().parents[2]  # where examples/ is, in a source checkout


@dataclass
class WorkerRun:
    returncode: int
    output: dict[str, Any] | None
    log: str


class AgentWorld:
    """A ledger, a payments sandbox and its connector, and a checkpoint database."""

    def __init__(self, stack: Stack, sandbox: SandboxProc, db: str, saver: str = "sqlite",
                 root: Path = REPO_ROOT):
        self.stack, self.sandbox, self.db, self.saver = stack, sandbox, db, saver
        self.root = root
        self.connector: Proc | None = None
        self._n = 0
        # Workers and checks still running: a scenario runs some on threads of their own
        # (falsify's Background), which die with the interpreter and would leave these behind.
        self._running: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()
        self._stopped = False  # stop_running was called: no worker may start after it

    def start_connector(self, failpoint: str | None = None,
                        env: dict[str, str] | None = None, lookup: bool = True) -> Proc:
        """The payments connector (one at a time); ``failpoint`` arms LEDGER_FAILPOINT,
        ``env`` overrides its LEDGER_CONNECTOR_* settings, ``lookup`` False declares the
        API without a lookup by key (the target cannot be queried)."""
        flags = () if lookup else ("--no-lookup",)
        self.connector = self.stack.connector("http", "--name", "payments", "--base-url",
                                              self.sandbox.url, "--deduplicates",
                                              "--fast-path", *flags, failpoint=failpoint,
                                              env=env)
        return self.connector

    def start_watcher(self, key_template: str) -> Proc:
        """``ledger-stream watch sandbox`` on this world's payments sandbox (stopped with
        the stack)."""
        watcher = Proc(["watch", "sandbox", "--name", "payments", "--base-url",
                        self.sandbox.url, "--key-template", key_template, "--interval", "0.5",
                        "--bootstrap", self.stack.bootstrap,
                        "--topic-prefix", self.stack.settings.topic_prefix],
                       self.stack.tmp / "watcher.log")
        self.stack.procs.append(watcher)
        return watcher

    def stop_connector(self, kill: bool = False) -> None:
        """SIGKILL (mid-call, nothing committed) or stop (leaves its group cleanly)."""
        if self.connector is not None:
            if kill:
                self.connector.kill()
            else:
                self.connector.stop(15)

    def worker(self, thread: str, action: str, *extra: str, failpoint: str | None = None,
               bypass: bool = False, durability: str = "sync", version: str | None = None,
               timeout_s: float = 90) -> WorkerRun:
        self._n += 1
        env = self._worker_env(failpoint)
        cmd = [sys.executable, "-m", "examples.refund_agent.worker", "--db", self.db,
               "--saver", self.saver, "--thread", thread, "--durability", durability]
        if version:
            cmd += ["--version", version]
        if bypass:
            cmd += ["--bypass-url", self.sandbox.url]
        return self._run([*cmd, action, *extra], env, timeout_s)

    def queue_worker(self, topic: str, action: str, *extra: str,
                     failpoint: str | None = None, bypass: bool = False,
                     timeout_s: float = 90) -> WorkerRun:
        """``examples.refund_agent.queue_worker`` on the work queue ``topic``: ``enqueue``
        a refund job or ``work`` the next one (bypassed: straight to the sandbox)."""
        cmd = [sys.executable, "-m", "examples.refund_agent.queue_worker", "--topic", topic]
        if bypass:
            cmd += ["--bypass-url", self.sandbox.url]
        return self._run([*cmd, action, *extra], self._worker_env(failpoint), timeout_s)

    def _worker_env(self, failpoint: str | None) -> dict[str, str]:
        env = {**os.environ, "LEDGER_KAFKA_BOOTSTRAP": self.stack.bootstrap,
               "LEDGER_TOPIC_PREFIX": self.stack.settings.topic_prefix,
               "LEDGER_APPROVAL_SIGNING_KEY": str(write_signing_key(TEST_APPROVER,
                                                                    self.stack.tmp))}
        if failpoint:
            env["LEDGER_FAILPOINT"] = failpoint
        return env

    def upgrade_check(self, graph: str, *threads: str, resume: str | None = None,
                      timeout_s: float = 120) -> WorkerRun:
        """``ledger-stream upgrade-check --json`` of ``threads`` (all in flight when none)
        against ``graph`` (MODULE:ATTR) on this world's checkpoints."""
        s = self.stack.settings
        env = {**os.environ, "LEDGER_KAFKA_BOOTSTRAP": self.stack.bootstrap,
               "LEDGER_TOPIC_PREFIX": s.topic_prefix, **PROCESSOR_ENV,
               "LEDGER_CONSUMER_GROUP": processor_group(s)}
        cmd = [sys.executable, "-m", "ledger_stream.cli.main", "upgrade-check", "--json",
               "--graph", graph, "--checkpointer", self.db]
        if threads:
            cmd += ["--threads", *threads]
        if resume:
            cmd += ["--resume", resume]
        return self._run(cmd, env, timeout_s)

    def _run(self, cmd: list[str], env: dict[str, str], timeout_s: float) -> WorkerRun:
        """``cmd`` to its end (killed, and TimeoutExpired raised, past ``timeout_s``), as
        ``subprocess.run`` does, but known to :meth:`stop_running` meanwhile; the last
        JSON line of its output is its result."""
        with self._lock:
            if self._stopped:
                raise RuntimeError("the world is stopping: no new worker")
            # Started under the lock, so stop_running either sees it or comes before it.
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, cwd=self.root)
            self._running.add(proc)
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
        finally:
            with self._lock:
                self._running.discard(proc)
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        output = json.loads(lines[-1]) if lines else None
        return WorkerRun(proc.returncode, output, stdout[-3000:] + stderr[-3000:])

    def stop_running(self) -> None:
        """SIGKILL, by PID, every worker or check still running (the world is going)."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            proc.kill()
        for proc in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)

    def effects(self, invoice: str, bypass: bool = False) -> list[dict[str, Any]]:
        """The sandbox's own ledger: effects for this invoice's refund."""
        if bypass:
            return [e for e in self.sandbox.ledger()["effects"]
                    if e["idempotency_key"].startswith("bypass-")]
        return self.sandbox.effects(f"acme/refund/{invoice}")


@contextmanager
def agent_world(settings: Settings, tmp: Path, saver: str = "sqlite",
                dsn: str | None = None, processor_env: dict[str, str] | None = None,
                root: Path = REPO_ROOT) -> Iterator[AgentWorld]:
    """A world on ``settings``' topics; ``processor_env`` adds LEDGER_* settings for the
    processor (e.g. a short LEDGER_REPLAY_WINDOW_MS)."""
    sandbox = SandboxProc(tmp / "sandbox.db")
    try:
        stack = Stack(settings, tmp, processor_env={**PROCESSOR_ENV, **(processor_env or {})})
        try:
            world = AgentWorld(stack, sandbox, dsn or str(tmp / "checkpoints.sqlite"), saver,
                               root)
            try:
                world.start_connector()
                yield world
            finally:
                world.stop_running()
        finally:
            stack.close()
    finally:
        sandbox.stop()
