"""What ``ledger_tool`` tells the model, per receipt status, in a real LangGraph graph
(StateGraph, ToolNode, a SQLite checkpointer). Only a succeeded effect is a successful tool
result; an effect whose outcome is unknown or still pending (accepted, in progress,
reconciling, held, needs reconciliation) and a refusal are tool errors naming
the key, the status and whether it is resolved, as LedgerMiddleware answers (a hostile
review found ``needs_reconciliation`` reported as a successful refund). The client is a
scripted fake behind LedgerClient's interface: intents are built by the real
``LedgerClient.intent``, the receipt is the one the test scripts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from ledger_stream.domain import events as ev
from ledger_stream.langgraph import LedgerReceipts, ledger_tool
from ledger_stream.testing.ledger import InMemoryLedger

KEY = "acme/refund/inv-1"
S = ev.ReceiptStatus
# Whether the ledger knows the outcome (resolved), by status, as LedgerMiddleware says it.
RESOLVED = {S.ACCEPTED: False, S.IN_PROGRESS: False, S.RECONCILING: False,
            S.NEEDS_RECONCILIATION: False, S.SUCCEEDED: True, S.FAILED: True,
            S.REJECTED: True, S.HELD: False}


class ScriptedLedger(InMemoryLedger):
    """Answers each submit with the next scripted (status, reason, holder); a None entry is
    no receipt within the wait. ``holder`` "own": this intent's effect; "other": an earlier
    intent's (a repeat)."""

    def __init__(self, *answers: tuple[ev.ReceiptStatus, ev.Reason, str] | None) -> None:
        super().__init__()
        self.answers = list(answers)

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        self.intents.append(intent)
        answer = self.answers.pop(0)
        if answer is None:
            raise TimeoutError(f"no receipt for {intent.key} within the wait")
        status, reason, holder = answer
        return ev.Receipt(f"r-{len(self.intents)}", intent.key, intent.event_id, status,
                          reason, intent.args_hash, 1, 1, key_status=status,
                          effect_intent_id=intent.event_id if holder == "own" else "i-0")


class State(MessagesState):
    ledger_receipts: LedgerReceipts


def graph(client: ScriptedLedger, tmp_path: Path) -> Any:
    @ledger_tool(client, action="refund", target="payments", tenant="acme", graph="g",
                 version="1", key="invoice")
    def issue_refund(invoice: str, amount: float) -> dict[str, Any]:
        """Refund an invoice."""
        return {"invoice": invoice, "amount": amount}

    builder = StateGraph(State)
    builder.add_node("tools", ToolNode([issue_refund]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    saver = SqliteSaver(sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False))
    return builder.compile(checkpointer=saver)


CONFIG = {"configurable": {"thread_id": "t-1"}}
CALL = {"messages": [AIMessage("", tool_calls=[{
    "name": "issue_refund", "args": {"invoice": "inv-1", "amount": 5}, "id": "call-1"}])]}


def answered(client: ScriptedLedger, tmp_path: Path) -> tuple[ToolMessage, dict[str, Any]]:
    """The tool's message and the checkpointed ``ledger_receipts[KEY]``."""
    built = graph(client, tmp_path)
    built.invoke(CALL, CONFIG)
    values = built.get_state(CONFIG).values
    (message,) = [m for m in values["messages"] if isinstance(m, ToolMessage)]
    return message, values["ledger_receipts"][KEY]


@pytest.mark.parametrize("status", list(ev.ReceiptStatus))
def test_only_a_succeeded_effect_is_a_successful_tool_result(status: ev.ReceiptStatus,
                                                             tmp_path: Path) -> None:
    reason = ev.Reason.VERSION if status is S.HELD else ev.Reason.NONE
    message, kept = answered(ScriptedLedger((status, reason, "own")), tmp_path)
    content = json.loads(message.content)
    assert message.status == ("success" if status is S.SUCCEEDED else "error")
    assert status.value in message.content
    assert (content["key"], content["status"], content["resolved"]) == (
        KEY, status.value, RESOLVED[status])
    assert kept["status"] == status.value
    if status is not S.SUCCEEDED:  # what the model should do
        assert ("not settled yet" if not RESOLVED[status] else "not done") in content["note"]


def test_an_effect_held_by_a_freeze_is_not_settled(tmp_path: Path) -> None:
    message, _ = answered(ScriptedLedger((S.HELD, ev.Reason.FROZEN, "own")), tmp_path)
    content = json.loads(message.content)
    assert (message.status, content["status"], content["reason"], content["resolved"]) == (
        "error", "held", "frozen", False)
    assert "not settled yet" in content["note"] and "unfreeze" in content["note"]


def test_an_intent_held_behind_an_earlier_versions_effect_is_not_settled(
        tmp_path: Path) -> None:
    """Held for its version: the key's effect, asked by an earlier version of the graph,
    is in flight. Not "resolved, not done" (a hostile review: the model, told the work
    failed, may do it another way under another key while it is about to happen)."""
    message, _ = answered(ScriptedLedger((S.HELD, ev.Reason.VERSION, "other")), tmp_path)
    content = json.loads(message.content)
    assert (message.status, content["status"], content["reason"], content["resolved"]) == (
        "error", "held", "version", False)
    assert "in flight" in content["note"] and "another way" in content["note"]


def test_a_repeat_of_a_succeeded_effect_stays_a_success(tmp_path: Path) -> None:
    message, kept = answered(ScriptedLedger((S.SUCCEEDED, ev.Reason.NONE, "other")),
                             tmp_path)
    content = json.loads(message.content)
    assert (message.status, content["answer"], content["resolved"]) == (
        "success", "already_done", True)
    assert kept["answer"] == "already_done" and "note" not in content


def test_no_receipt_within_the_wait_fails_the_step_and_a_resume_asks_again(
        tmp_path: Path) -> None:
    """No answer at all is no tool result: the step fails, its checkpoint keeps it, and
    resuming the thread submits the same intent again (the ledger answers it by its key)."""
    client = ScriptedLedger(None, (S.SUCCEEDED, ev.Reason.NONE, "own"))
    built = graph(client, tmp_path)
    with pytest.raises(TimeoutError):
        built.invoke(CALL, CONFIG)
    stuck = built.get_state(CONFIG)
    assert stuck.next == ("tools",)
    assert not [m for m in stuck.values["messages"] if isinstance(m, ToolMessage)]
    built.invoke(None, CONFIG)
    (message,) = [m for m in built.get_state(CONFIG).values["messages"]
                  if isinstance(m, ToolMessage)]
    assert message.status == "success"
    first, second = client.intents
    assert (first.key, first.args_hash) == (second.key, second.args_hash)
