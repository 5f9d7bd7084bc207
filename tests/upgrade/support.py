"""An in-memory ledger for the upgrade checks, its policy and recorders (a fixtures module: it
holds no tests)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import pytest
from langgraph.types import Command

from examples.refund_agent.graph import refund_args, refund_key
from examples.refund_agent.variants import VARIANTS, Effects
from ledger_lab.harness.approvers import TEST_APPROVER, trusted
from ledger_stream import LedgerClient, args_hash, sign_approval
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState
from ledger_stream.sdk.dry_run import dry_run

POLICY = Policy(approval_keys=trusted(TEST_APPROVER),
                approval_required_actions=frozenset({"refund"}))


class MemoryLedger:
    """What a processor would hold after the intents given to ``record``."""

    def __init__(self) -> None:
        self.states: dict[str, KeyState] = {}
        self.intents: list[ev.Intent] = []
        self.reads: list[str] = []

    def record(self, intent: ev.Intent) -> ev.Receipt:
        self.intents.append(intent)
        decision = decide(self.key_state(intent.key), intent, POLICY, int(time.time() * 1000))
        self.states[intent.key] = decision.state
        return next(o for o in decision.outputs if isinstance(o, ev.Receipt))

    def key_state(self, key: str) -> KeyState:
        self.reads.append(key)
        return self.states.get(key, KeyState(key=key))

    def thread_intents(self, thread_ids: Collection[str]) -> dict[str, list[ev.Intent]]:
        found: dict[str, list[ev.Intent]] = {}
        for intent in self.intents:
            if intent.workflow.thread_id in thread_ids:
                found.setdefault(intent.workflow.thread_id, []).append(intent)
        return found

    def undecided(self, upto: Mapping[int, int] | None = None) -> int:
        return 0

    def intent_ends(self) -> dict[int, int]:
        return {}


class Killed(BaseException):
    """The worker dies right after its intent is recorded."""


class Recording:
    def __init__(self, ledger: MemoryLedger, kill: bool) -> None:
        self.ledger, self.kill = ledger, kill

    def answer(self, intent: ev.Intent) -> ev.Receipt:
        receipt = self.ledger.record(intent)
        if self.kill:
            raise Killed
        return receipt


def approval_for(_thread: str, asked: Any) -> dict[str, Any]:
    material = refund_args(asked["args"]["invoice"], asked["args"]["amount"])
    approval = sign_approval(TEST_APPROVER, refund_key(material), "ap-1",
                             args_hash(material), "", int(time.time() * 1000) + 600_000)
    return {"approval_id": approval.approval_id, "payload_hash": approval.payload_hash,
            "policy_revision": "", "expires_at_ms": approval.expires_at_ms,
            "signature": approval.signature, "key_id": approval.key_id}


def graph(client: LedgerClient, variant: str, saver: Any = None) -> Any:
    chosen = VARIANTS[variant]
    return chosen.build(Effects(client, None, chosen.version), saver)


def write_threads(saver: Any, client: LedgerClient) -> MemoryLedger:
    """Threads ``waiting`` (at its approval), ``pending`` (killed after its intent) and
    ``done``, written by the v1 graph; the ledger as the processor would hold it."""
    ledger = MemoryLedger()
    v1 = graph(client, "refund", saver)
    for thread, amount in (("waiting", 10.0), ("pending", 12.5), ("done", 30.0)):
        config = {"configurable": {"thread_id": thread}}
        v1.invoke({"invoice": f"inv-{thread}", "amount": amount, "messages": []}, config)
        if thread == "waiting":
            continue
        answer = Command(resume=approval_for(thread, {"args": {"invoice": f"inv-{thread}",
                                                               "amount": amount}}))
        with dry_run(Recording(ledger, kill=thread == "pending")), contextlib.suppress(Killed):
            v1.invoke(answer, config, durability="sync")
    return ledger


@pytest.fixture
def client() -> Iterator[LedgerClient]:
    """A client whose Kafka is never reached: the dry runs refuse to produce."""
    c = LedgerClient(Settings(kafka_bootstrap="127.0.0.1:9"))
    yield c
    c.close()
