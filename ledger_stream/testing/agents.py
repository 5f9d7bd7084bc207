"""Refund-agent workers as real processes against a Stack (processor + sandbox connector)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger_stream.config import Settings
from ledger_stream.testing.sandbox import SandboxProc
from ledger_stream.testing.stack import Stack

APPROVAL_SECRET = "approval-service-key"
PROCESSOR_ENV = {"LEDGER_APPROVAL_REQUIRED_ACTIONS": '["refund"]',
                 "LEDGER_APPROVAL_SECRET": APPROVAL_SECRET}


@dataclass
class WorkerRun:
    returncode: int
    output: dict[str, Any] | None
    log: str


class AgentWorld:
    """A ledger, a payments sandbox and its connector, and a checkpoint database."""

    def __init__(self, stack: Stack, sandbox: SandboxProc, db: str, saver: str = "sqlite"):
        self.stack, self.sandbox, self.db, self.saver = stack, sandbox, db, saver
        self._n = 0

    def worker(self, thread: str, action: str, *extra: str, failpoint: str | None = None,
               bypass: bool = False, durability: str = "sync", version: str | None = None,
               timeout_s: float = 90) -> WorkerRun:
        self._n += 1
        s = self.stack.settings
        env = {**os.environ, "LEDGER_KAFKA_BOOTSTRAP": self.stack.bootstrap,
               "LEDGER_TOPIC_PREFIX": s.topic_prefix, "LEDGER_APPROVAL_SECRET": APPROVAL_SECRET}
        if failpoint:
            env["LEDGER_FAILPOINT"] = failpoint
        cmd = [sys.executable, "-m", "examples.refund_agent.worker", "--db", self.db,
               "--saver", self.saver, "--thread", thread, "--durability", durability]
        if version:
            cmd += ["--version", version]
        if bypass:
            cmd += ["--bypass-url", self.sandbox.url]
        done = subprocess.run([*cmd, action, *extra], env=env, capture_output=True, text=True,
                              timeout=timeout_s, cwd=Path(__file__).resolve().parents[2])
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        output = json.loads(lines[-1]) if lines else None
        return WorkerRun(done.returncode, output, done.stdout[-3000:] + done.stderr[-3000:])

    def effects(self, invoice: str, bypass: bool = False) -> list[dict[str, Any]]:
        """The sandbox's own ledger: effects for this invoice's refund."""
        if bypass:
            return [e for e in self.sandbox.ledger()["effects"]
                    if e["idempotency_key"].startswith("bypass-")]
        return self.sandbox.effects(f"acme/refund/{invoice}")


@contextmanager
def agent_world(settings: Settings, tmp: Path, saver: str = "sqlite",
                dsn: str | None = None) -> Iterator[AgentWorld]:
    sandbox = SandboxProc(tmp / "sandbox.db")
    old = {k: os.environ.get(k) for k in PROCESSOR_ENV}
    os.environ.update(PROCESSOR_ENV)  # read by the processor process Stack starts
    try:
        stack = Stack(settings, tmp)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
    try:
        yield AgentWorld(stack, sandbox, dsn or str(tmp / "checkpoints.sqlite"), saver)
    finally:
        stack.close()
        sandbox.stop()
