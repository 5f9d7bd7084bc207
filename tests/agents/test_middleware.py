"""LedgerMiddleware inside a real LangChain ``create_agent`` agent with a real checkpointer
(SQLite). The ledger client here is a recording fake behind the client's interface: these
tests pin what the middleware decides per tool. The real path (broker, processor, connector,
payments sandbox, SIGKILLs, replays, forks) is the falsification matrix's middleware cases
(tests/agents/test_falsification.py, ``M1``, ``M2``, ``M4``)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.sqlite import SqliteSaver

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import InvalidKeyError
from ledger_stream.langgraph import Effect, LedgerMiddleware


class OneCallModel(BaseChatModel):
    """Calls ``tool`` with ``args`` once, then answers; records the tools it was bound to."""

    call: dict[str, Any]
    bound: list[Any] = []

    @property
    def _llm_type(self) -> str:
        return "one-call"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OneCallModel:
        self.bound.append(list(tools))
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])
        call = {**self.call, "id": f"call_{uuid.uuid4().hex[:8]}"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])


class RecordingClient:
    """The LedgerClient calls the middleware makes, answered with a fixed status."""

    def __init__(self, status: ev.ReceiptStatus = ev.ReceiptStatus.SUCCEEDED,
                 reason: ev.Reason = ev.Reason.NONE) -> None:
        self.status, self.reason = status, reason
        self.intents: list[ev.Intent] = []

    def intent(self, key: str, action: str, target: str, args: Any, **kw: Any) -> ev.Intent:
        from ledger_stream.sdk.client import LedgerClient

        return LedgerClient.intent(self, key, action, target, args, **kw)  # type: ignore[arg-type]

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        self.intents.append(intent)
        return ev.Receipt(receipt_id="r1", key=intent.key, intent_event_id=intent.event_id,
                          status=self.status, reason=self.reason, args_hash=intent.args_hash,
                          attempts=1, at_ms=1, external_id="re_1",
                          key_status=ev.ReceiptStatus.SUCCEEDED)


RAN: list[str] = []


@tool
def issue_refund(invoice: str, amount: float) -> str:
    """Refund an invoice."""
    RAN.append(f"issue_refund {invoice}")
    return "paid directly"


@tool
def lookup_invoice(invoice: str) -> str:
    """Read an invoice."""
    RAN.append(f"lookup_invoice {invoice}")
    return json.dumps({"invoice": invoice, "amount": 10})


@tool
def send_email(to: str) -> str:
    """Send an email."""
    RAN.append(f"send_email {to}")
    return "sent"


TOOLS: list[BaseTool] = [issue_refund, lookup_invoice, send_email]


def middleware(client: Any) -> LedgerMiddleware:
    return LedgerMiddleware(client, tenant="acme", graph="g", version="1", effects={
        "issue_refund": Effect("refund", "payments", business_id="invoice")},
        exempt=["lookup_invoice"])


def run(client: Any, call: dict[str, Any], tmp_path: Any) -> dict[str, Any]:
    RAN.clear()
    saver = SqliteSaver(sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False))
    agent = create_agent(OneCallModel(call=call), TOOLS, middleware=[middleware(client)],
                         checkpointer=saver)
    config = {"configurable": {"thread_id": "t1"}}
    values: dict[str, Any] = agent.invoke({"messages": [HumanMessage("go")]}, config)
    return values


def tool_message(values: dict[str, Any]) -> ToolMessage:
    return next(m for m in values["messages"] if isinstance(m, ToolMessage))


def refusal(call: dict[str, Any], tmp_path: Any) -> str:
    """The tool error ``call`` gets, having checked nothing was submitted and nothing ran."""
    client = RecordingClient()
    message = tool_message(run(client, call, tmp_path))
    assert client.intents == [] and RAN == []
    assert message.status == "error"
    return str(json.loads(message.content)["error"])


def test_an_effect_becomes_an_intent_keyed_by_its_business_id_and_never_runs(tmp_path):
    client = RecordingClient()
    values = run(client, {"name": "issue_refund",
                          "args": {"invoice": "inv-7", "amount": 12.5}}, tmp_path)
    (intent,) = client.intents
    message = tool_message(values)
    assert (intent.key, intent.action, intent.target) == ("acme/refund/inv-7", "refund",
                                                           "payments")
    assert json.loads(intent.args_json) == {"invoice": "inv-7", "amount": 12.5}
    assert (intent.workflow.graph, intent.workflow.thread_id, intent.workflow.node) == (
        "g", "t1", "tools")
    assert RAN == []  # the tool's own body (a direct payment) never ran
    assert message.status == "success" and json.loads(message.content)["external_id"] == "re_1"
    assert values["ledger_receipts"]["acme/refund/inv-7"]["status"] == "succeeded"


def test_the_async_path_submits_the_same_intent_off_the_event_loop():
    import asyncio

    from langgraph.checkpoint.memory import InMemorySaver

    client = RecordingClient()
    RAN.clear()
    agent = create_agent(OneCallModel(call={"name": "issue_refund",
                                            "args": {"invoice": "inv-8", "amount": 3}}),
                         TOOLS, middleware=[middleware(client)], checkpointer=InMemorySaver())
    values = asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]},
                                       {"configurable": {"thread_id": "t2"}}))
    (intent,) = client.intents
    assert intent.key == "acme/refund/inv-8" and RAN == []
    assert values["ledger_receipts"]["acme/refund/inv-8"]["status"] == "succeeded"


def test_a_conflict_is_a_tool_error_the_model_reads(tmp_path):
    client = RecordingClient(ev.ReceiptStatus.REJECTED, ev.Reason.CONFLICT)
    message = tool_message(run(client, {"name": "issue_refund",
                                        "args": {"invoice": "inv-7", "amount": 99}}, tmp_path))
    assert message.status == "error"
    assert json.loads(message.content)["reason"] == "conflict"


def test_arguments_are_validated_and_coerced_by_the_tool_schema_first(tmp_path):
    client = RecordingClient()
    run(client, {"name": "issue_refund", "args": {"invoice": "inv-7", "amount": "12.5"}},
        tmp_path)
    (intent,) = client.intents  # the same material arguments as amount=12.5
    assert json.loads(intent.args_json) == {"invoice": "inv-7", "amount": 12.5}

    (tmp_path / "b").mkdir()
    assert "amount: Field required" in refusal(
        {"name": "issue_refund", "args": {"invoice": "inv-7"}}, tmp_path / "b")


def test_a_read_only_tool_runs_as_written_without_an_intent(tmp_path):
    client = RecordingClient()
    message = tool_message(run(client, {"name": "lookup_invoice",
                                        "args": {"invoice": "inv-7"}}, tmp_path))
    assert client.intents == [] and RAN == ["lookup_invoice inv-7"]
    assert json.loads(message.content)["invoice"] == "inv-7"


def test_an_undeclared_tool_is_refused_and_nothing_runs(tmp_path):
    assert "not declared to the ledger" in refusal(
        {"name": "send_email", "args": {"to": "x@y"}}, tmp_path)


def test_a_call_without_its_business_id_is_refused(tmp_path):
    assert "has no invoice" in refusal(
        {"name": "issue_refund", "args": {"invoice": "", "amount": 1}}, tmp_path)


def test_tool_names_and_schemas_reach_the_model_unchanged(tmp_path):
    def schemas(with_middleware: bool) -> list[tuple[str, dict[str, Any]]]:
        model = OneCallModel(call={"name": "lookup_invoice", "args": {"invoice": "i"}},
                             bound=[])
        agent = create_agent(model, TOOLS, middleware=[middleware(RecordingClient())]
                             if with_middleware else [])
        agent.invoke({"messages": [HumanMessage("go")]})
        return [(t.name, t.tool_call_schema.model_json_schema()) for t in model.bound[0]]

    assert schemas(True) == schemas(False)
    assert [name for name, _ in schemas(True)] == ["issue_refund", "lookup_invoice",
                                                   "send_email"]


def test_declaring_a_tool_both_ways_is_refused():
    with pytest.raises(ValueError, match="both as an effect and exempt"):
        LedgerMiddleware(RecordingClient(), tenant="acme", graph="g", version="1",
                         effects={"a": Effect("refund", "p", "id")}, exempt=["a"])


def test_an_effect_without_a_business_id_is_refused_when_declared():
    for empty in ("", " ", (), ("invoice", "")):
        with pytest.raises(ValueError, match="business_id must name the argument"):
            Effect("refund", "payments", empty)



def test_one_business_id_written_differently_is_one_key_and_a_float_is_refused():
    """By the same rule as ledger_tool and the MCP server (business_id_part): 42, "42" and
    an accent composed or decomposed are one key; 42.0 (a second key beside 42) is refused."""
    effect = Effect("refund", "payments", "invoice")
    assert {effect.key("acme", {"invoice": v}) for v in (42, "42", " 42 ")} == {"acme/refund/42"}
    assert effect.key("acme", {"invoice": "caf\u00e9"}) == effect.key(
        "acme", {"invoice": "cafe\u0301"})
    for unusable in (42.0, True, {"id": 42}):
        with pytest.raises(InvalidKeyError):
            effect.key("acme", {"invoice": unusable})

def test_parallel_calls_in_one_step_each_carry_the_approval_of_their_own_call(tmp_path):
    """The refund agent's model asks for two refunds in one message; create_agent runs the
    two tool calls as tasks of one step, and each intent must carry its own invoice's
    approval (the middleware hands the approval reader the call's arguments)."""
    from langgraph.types import Command

    from examples.refund_agent.agent import build_agent, start_input

    client = RecordingClient()
    saver = SqliteSaver(sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False))
    agent = build_agent(client, None, "1.0", saver, parts=("a", "b"))
    config = {"configurable": {"thread_id": "t1"}}
    agent.invoke(start_input("inv-9", 40.0), config)
    asked = agent.get_state(config).tasks[0].interrupts[0].value["calls"]
    assert sorted(c["invoice"] for c in asked) == ["inv-9-a", "inv-9-b"]
    approvals = {c["invoice"]: {"approval_id": f"ap-{c['invoice']}", "payload_hash": "h",
                                "policy_revision": "", "expires_at_ms": 1, "signature": "s"}
                 for c in asked}
    values = agent.invoke(Command(resume=approvals), config)
    assert sorted((i.key, i.approval.approval_id if i.approval else None)
                  for i in client.intents) == [
        ("acme/refund/inv-9-a", "ap-inv-9-a"), ("acme/refund/inv-9-b", "ap-inv-9-b")]
    assert set(values["ledger_receipts"]) == {"acme/refund/inv-9-a", "acme/refund/inv-9-b"}
