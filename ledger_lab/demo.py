"""``ledger-stream demo``: the whole ledger on a real Kafka, start to finish.

Starts a local Kafka (unless LEDGER_KAFKA_BOOTSTRAP names one), creates demo topics, and
runs the real processes: the processor, the payments sandbox (a target that keeps its own
ledger of effects) and the HTTP connector. Then an agent, through the SDK, re-runs a refund
step the ways agents do (first run, resume, replay, a fork with another amount) and a
second refund meets a dropped connection after the payment committed. The sandbox's own
ledger shows one payment per refund. Everything it started is stopped by PID at the end.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_lab.local_kafka.ephemeral import kafka_for
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import operation_key
from ledger_stream.kafka.topics import create_topics, require_matching
from ledger_stream.sdk import ConflictError, LedgerClient

Say = Callable[[str], None]
WORKFLOW = ev.Workflow("refund-agent", "1.0", "thread-42", "issue_refund")


class Agent:
    """The agent side: one refund step, re-run the ways agent runtimes re-run steps."""

    def __init__(self, client: LedgerClient, say: Say) -> None:
        self.client = client
        self.say = say

    def refund(self, label: str, key: str, amount: float) -> ev.Receipt | None:
        args = {"invoice": key.rsplit("/", 1)[-1], "amount": amount, "currency": "EUR"}
        intent = self.client.intent(key, "refund", "payments", args, workflow=WORKFLOW)
        try:
            receipt = self.client.submit(intent, wait=60)
        except ConflictError as exc:
            self.say(f"  {label:<40} -> rejected: conflict, nothing sent "
                     f"(the key holds {exc.receipt.external_id})")
            return None
        self.say(f"  {label:<40} -> {receipt.status.value}, payment {receipt.external_id}, "
                 f"attempts {receipt.attempts}")
        return receipt


def _play(agent: Agent, sandbox: SandboxProc, say: Say) -> bool:
    first = operation_key("acme", "refund", "invoice-881")
    say(f"refund step for {first}")
    agent.refund("first run", first, 125.0)
    agent.refund("worker crashed, thread resumed", first, 125.0)
    agent.refund("time travel: replay from checkpoint", first, 125.0)
    agent.refund("fork with the amount changed to 250", first, 250.0)

    second = operation_key("acme", "refund", "invoice-882")
    say(f"refund step for {second}: the payments API commits, then drops the connection")
    sandbox.set_fault("commit_then_drop", key=second)
    agent.refund("first run (outcome unknown -> lookup)", second, 80.0)
    agent.refund("retry by the agent runtime", second, 80.0)

    counts = {key: len(sandbox.effects(key)) for key in (first, second)}
    for key, count in counts.items():
        say(f"payments sandbox ledger: {count} payment(s) for {key}")
    return all(count == 1 for count in counts.values())


def run_demo(settings: Settings, say: Say = print) -> int:
    settings = settings.model_copy(update={"topic_prefix": f"demo-{uuid.uuid4().hex[:6]}",
                                           "partitions": 3})
    with kafka_for(settings, say) as (bootstrap, _), \
            tempfile.TemporaryDirectory(prefix="ledger-demo-") as tmp:
        settings = settings.model_copy(update={"kafka_bootstrap": bootstrap})
        require_matching(create_topics(bootstrap, settings))
        say(f"topics {settings.topic_prefix}.* created; starting processor, payments sandbox, "
            "connector")
        sandbox = SandboxProc(Path(tmp) / "sandbox.db")
        # The demo signs no approvals: development mode lets the processor start without an
        # approver key (it says so in its log).
        stack = Stack(settings, Path(tmp), processor_env={"LEDGER_DEV_MODE": "1"})
        try:
            stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                            "--deduplicates")
            with LedgerClient(settings) as client:
                ok = _play(Agent(client, say), sandbox, say)
        finally:
            stack.close()
            sandbox.stop()
        say("demo " + ("passed: one payment per refund, however often the step ran"
                       if ok else "FAILED"))
        return 0 if ok else 1
