"""What a careless model, a slow ledger and odd tools do to LedgerMiddleware (found by a
hostile review): each case ends in one effect per business intent, or in a tool error the
model can read, never in a crashed run, a silent bypass or a second effect. The ledger here
runs the project's own ``decide`` (``ledger_stream.testing.InMemoryLedger``), so
dispatches are the real ones."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Freeze, Hold
from ledger_stream.langgraph import Effect, LedgerMiddleware
from ledger_stream.testing.ledger import DecideLedger, SilentLedger


class ScriptModel(BaseChatModel):
    """Turn i (a human message last) asks for ``turns[i]``'s calls; after tools: done."""

    turns: list[list[dict[str, Any]]]
    i: int = 0

    @property
    def _llm_type(self) -> str:
        return "script"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptModel:
        return self

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])
        calls = [{**c, "id": f"call_{uuid.uuid4().hex[:8]}"} for c in self.turns[self.i]]
        object.__setattr__(self, "i", self.i + 1)
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=calls))])


def agent(tools: list[Any], middleware: LedgerMiddleware,
          turns: list[list[dict[str, Any]]]) -> Any:
    return create_agent(ScriptModel(turns=turns), tools, middleware=[middleware],
                        checkpointer=InMemorySaver())


def run(tools: list[Any], middleware: LedgerMiddleware,
        turns: list[list[dict[str, Any]]]) -> list[ToolMessage]:
    graph = agent(tools, middleware, turns)
    config = {"configurable": {"thread_id": "t1"}}
    values: dict[str, Any] = {}
    for _ in turns:
        values = graph.invoke({"messages": [HumanMessage("go")]}, config)
    return [m for m in values["messages"] if isinstance(m, ToolMessage)]


@tool
def issue_refund(invoice: str, amount: float) -> str:
    """Refund an invoice."""
    raise AssertionError("the middleware must never run an effect's tool")


def refunds(client: Any, **kw: Any) -> LedgerMiddleware:
    return LedgerMiddleware(client, tenant="acme", graph="g", version="1", effects={
        "issue_refund": Effect("refund", "payments", "invoice")}, **kw)


def refund_call(invoice: str, amount: Any = 5) -> dict[str, Any]:
    return {"name": "issue_refund", "args": {"invoice": invoice, "amount": amount}}


def test_no_answer_within_the_wait_is_a_tool_error_not_a_crashed_run():
    client = SilentLedger()
    (message,) = run([issue_refund], refunds(client, wait=0.1), [[refund_call("inv-1")]])
    assert message.status == "error"
    assert "no answer within" in json.loads(message.content)["error"]
    assert len(client.dispatches) == 1  # recorded once; the repeat the model may make is safe


def test_the_async_path_turns_a_missing_answer_into_a_tool_error_too():
    client = SilentLedger()
    graph = agent([issue_refund], refunds(client, wait=0.1), [[refund_call("inv-1")]])
    values = asyncio.run(graph.ainvoke({"messages": [HumanMessage("go")]},
                                       {"configurable": {"thread_id": "t1"}}))
    (message,) = [m for m in values["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error"


def test_an_effect_not_settled_yet_is_not_reported_as_success():
    client = DecideLedger()  # the first intent is answered "accepted": dispatched, not done
    (message,) = run([issue_refund], refunds(client), [[refund_call("inv-1")]])
    content = json.loads(message.content)
    assert (message.status, content["status"], content["resolved"]) == (
        "error", "accepted", False)
    assert "not settled yet" in content["note"]


def test_a_frozen_effect_is_not_resolved_and_nothing_is_dispatched():
    freeze = Freeze("acme", "refund", ev.FreezeMode.HOLD, "INC-7", "ops", "f-1", 1)
    client = DecideLedger(hold=Hold(freeze))
    (message,) = run([issue_refund], refunds(client), [[refund_call("inv-1")]])
    content = json.loads(message.content)
    assert (message.status, content["status"], content["reason"], content["resolved"]) == (
        "error", "held", "frozen", False)
    assert "INC-7" in content["detail"] and "not settled yet" in content["note"]
    assert client.dispatches == []


def test_the_intent_says_a_first_run_asked_and_names_its_checkpoint():
    client = DecideLedger()
    (message,) = run([issue_refund], refunds(client), [[refund_call("inv-1")]])
    (sent,) = client.intents
    assert sent.origin is ev.Origin.FRESH and sent.workflow.checkpoint_id
    assert json.loads(message.content)["origin"] == "fresh"


def test_whitespace_around_a_business_id_is_one_key():
    client = DecideLedger()
    run([issue_refund], refunds(client), [[refund_call("inv-7")], [refund_call(" inv-7 ")]])
    assert {i.key for i in client.intents} == {"acme/refund/inv-7"}
    assert len(client.dispatches) == 1


def test_two_effects_sharing_an_action_are_refused_when_built():
    with pytest.raises(ValueError, match="share the action 'refund'"):
        LedgerMiddleware(DecideLedger(), tenant="acme", graph="g", version="1", effects={
            "refund_card": Effect("refund", "cards", "invoice"),
            "refund_wallet": Effect("refund", "wallet", "invoice")})


def test_an_empty_workflow_version_is_refused_when_built():
    with pytest.raises(ValueError, match="graph and version"):
        LedgerMiddleware(DecideLedger(), tenant="acme", graph="g", version="",
                         effects={"issue_refund": Effect("refund", "payments", "invoice")})


class Speed(enum.Enum):
    STANDARD = "standard"
    EXPRESS = "express"


@tool
def ship(order: uuid.UUID, speed: Speed, on: datetime.date) -> str:
    """Ship an order."""
    raise AssertionError("the middleware must never run an effect's tool")


def test_dates_uuids_and_enums_become_json_arguments():
    client = DecideLedger()
    order = str(uuid.uuid4())
    middleware = LedgerMiddleware(client, tenant="acme", graph="g", version="1",
                                  effects={"ship": Effect("ship", "warehouse", "order")})
    run([ship], middleware, [[{"name": "ship", "args": {
        "order": order, "speed": "express", "on": "2026-12-24"}}]])
    (intent,) = client.intents
    assert json.loads(intent.args_json) == {"order": order, "speed": "express",
                                            "on": "2026-12-24"}


REFUND_SCHEMA = {"type": "object", "title": "issue_refund",
                 "properties": {"invoice": {"type": "string"}, "amount": {"type": "number"}},
                 "required": ["invoice", "amount"]}


def test_a_json_schema_tool_missing_a_required_argument_is_refused():
    client = DecideLedger()
    refund = StructuredTool(name="issue_refund", description="Refund an invoice.",
                            args_schema=REFUND_SCHEMA, func=lambda **kw: "never")
    (message,) = run([refund], refunds(client),
                     [[{"name": "issue_refund", "args": {"invoice": "inv-1"}}]])
    assert message.status == "error" and "amount" in json.loads(message.content)["error"]
    assert client.intents == [] and client.dispatches == []


def test_arguments_outside_the_material_ones_travel_as_payload():
    client = DecideLedger()

    @tool
    def send_email(to: str, order: str, body: str) -> str:
        """Send an order's confirmation."""
        raise AssertionError("the middleware must never run an effect's tool")

    middleware = LedgerMiddleware(client, tenant="acme", graph="g", version="1", effects={
        "send_email": Effect("email", "smtp", "order",
                             material=lambda a: {"to": a["to"], "order": a["order"]},
                             payload=lambda a: {"body": a["body"]})})
    run([send_email], middleware, [[{"name": "send_email", "args": {
        "to": "a@example.com", "order": "o-1", "body": "Your order is on its way"}}]])
    (dispatch,) = client.dispatches
    assert json.loads(dispatch.payload_json) == {"body": "Your order is on its way"}
    assert "body" not in json.loads(dispatch.args_json)


def test_a_provider_built_in_tool_is_refused_unless_declared_exempt():
    hosted = {"type": "mcp", "server_label": "stripe", "server_url": "https://example.com"}
    with pytest.raises(ValueError, match="built-in provider tool"):
        run([issue_refund, hosted], refunds(DecideLedger()), [[refund_call("inv-1")]])
    run([issue_refund, hosted], refunds(DecideLedger(), exempt=["mcp"]),
        [[refund_call("inv-1")]])
