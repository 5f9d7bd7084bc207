"""The refund agent (real LangGraph, SqliteSaver, ToolNode, interrupt) through the ledger."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from examples.refund_agent.graph import GRAPH, TENANT, VERSION, build_graph, refund_args, refund_key
from ledger_lab.harness.agents import PROCESSOR_ENV, AgentWorld, agent_world
from ledger_lab.harness.approvers import TEST_APPROVER
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream import Approval, LedgerClient, args_hash, sign_approval
from ledger_stream.config import Settings
from ledger_stream.langgraph import ReceiptFollower, ledger_tool

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def world(ledger_topics: Settings, tmp_path: Path) -> Iterator[AgentWorld]:
    with agent_world(ledger_topics, tmp_path) as w:
        yield w


def approved_thread(world: AgentWorld, bypass: bool = False) -> tuple[str, str]:
    thread, invoice = f"t-{uuid.uuid4().hex[:6]}", f"inv-{uuid.uuid4().hex[:6]}"
    start = world.worker(thread, "start", "--invoice", invoice, "--amount", "125",
                         bypass=bypass)
    assert start.returncode == 0, start.log
    return thread, invoice


def test_happy_path_one_refund(world):
    thread, invoice = approved_thread(world)
    done = world.worker(thread, "approve")
    assert done.returncode == 0, done.log
    receipt = done.output["ledger_receipts"][f"acme/refund/{invoice}"]
    (effect,) = world.effects(invoice)
    assert (receipt["status"], receipt["external_id"]) == ("succeeded", effect["id"])


# Killed after the effect, before the reply is saved, then resumed: falsification case 1
# (tests/agents/test_falsification.py), with and without the ledger.


def test_receipt_follower_settles_a_thread_left_pending(ledger_topics: Settings,
                                                        tmp_path: Path, monkeypatch):
    """The tool's wait runs out before any connector runs; the follower writes the final
    receipt into the thread once the effect settles."""
    for name, value in PROCESSOR_ENV.items():
        monkeypatch.setenv(name, value)
    stack = Stack(ledger_topics, tmp_path)
    sandbox = SandboxProc(tmp_path / "sandbox.db")
    client = LedgerClient(ledger_topics)
    key = "acme/refund/inv-f"
    try:
        saver = SqliteSaver(sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False))
        graph = build_graph(_short_wait_tool(client), saver)
        config = {"configurable": {"thread_id": "t-follow"}}
        graph.invoke({"invoice": "inv-f", "amount": 10.0, "messages": []}, config)
        approval = sign_approval(TEST_APPROVER, key, "ap-1",
                                 args_hash(refund_args("inv-f", 10.0)), "", 2**42)
        graph.invoke(Command(resume=asdict(approval)), config)
        held = graph.get_state(config).values["ledger_receipts"][key]
        assert held["status"] == "accepted"  # nobody has applied it yet

        stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                        "--deduplicates")
        follower = ReceiptFollower(ledger_topics, stack.bootstrap, graph)
        try:
            deadline = time.monotonic() + 60
            while follower.updated == 0 and time.monotonic() < deadline:
                follower.poll()
        finally:
            follower.close()
        settled = graph.get_state(config).values["ledger_receipts"][key]
        (effect,) = sandbox.effects(key)
        assert (settled["status"], settled["external_id"]) == ("succeeded", effect["id"])
    finally:
        client.close()
        stack.close()
        sandbox.stop()


def _short_wait_tool(client: LedgerClient):
    @ledger_tool(client, action="refund", target="payments", tenant=TENANT, graph=GRAPH,
                 version=VERSION, key=refund_key, wait=3.0,
                 approval=lambda state: Approval(**state["approval"]))
    def issue_refund(invoice: str, amount: float) -> dict:
        """Refund an invoice to the customer's original payment method."""
        return refund_args(invoice, amount)

    return issue_refund
