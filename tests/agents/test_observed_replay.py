"""Observed steps on the real path: a LangChain ``create_agent`` agent with
``LedgerMiddleware`` and a LangGraph ``StateGraph`` with an ``@observed`` node, each on a
SQLite checkpointer, against the real broker, processor, HTTP connector and payments
sandbox. A replay (time travel to the checkpoint before the observed step) that reads the
same result is not flagged; one whose model answered differently (or whose price lookup
returned another price) is flagged on the key it asked for, in ``ledger-stream inspect``,
the view's ``GET /v1/timeline`` and ``ledger-stream evidence``, while the ledger's answer
stays the original receipt and the sandbox holds one payment. The model's text appears
nowhere in the ledger's records."""

from __future__ import annotations

import json
import sqlite3
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict
from urllib.parse import quote

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_lab.harness.view import ServedView
from ledger_stream import LedgerClient
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.langgraph import (
    Effect,
    LedgerMiddleware,
    LedgerObservations,
    LedgerReceipts,
    ledger_tool,
    observed,
)

pytestmark = pytest.mark.timeout(300)

SAID = {"text": "Refunding inv-7 in full, as the customer asked."}  # what the "LLM" answers


class ScriptedModel(BaseChatModel):
    """A deterministic chat model: says ``SAID["text"]`` and calls ``issue_refund`` for
    inv-7, then, once the tool answered, says done."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])
        call = {"name": "issue_refund", "args": {"invoice": "inv-7", "amount": 12.5},
                "id": f"call_{uuid.uuid4().hex[:8]}"}  # a new id on every call, as models do
        message = AIMessage(SAID["text"], tool_calls=[call],
                            response_metadata={"model_name": "scripted-1"})
        return ChatResult(generations=[ChatGeneration(message=message)])


@tool
def issue_refund(invoice: str, amount: float) -> str:
    """Refund an invoice."""
    raise AssertionError("the connector applies refunds, never the tool")


def common(s: Settings) -> list[str]:
    assert s.kafka_bootstrap
    return ["--bootstrap", s.kafka_bootstrap, "--topic-prefix", s.topic_prefix]


def intent_rows(key: str, settings: Settings, capsys: pytest.CaptureFixture[str]
                ) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["inspect", key, "--json", "--scan", *common(settings)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return [r for r in rows if r["role"] == "intents"]


def replay_before(app: Any, thread: dict[str, Any], node: str) -> None:
    """Time travel: run the thread again from the first checkpoint whose next step is
    ``node`` (before the observed step ran)."""
    before = [s for s in app.get_state_history(thread) if s.next == (node,)][-1]
    app.invoke(None, before.config)


def test_a_replay_whose_model_answered_differently_is_flagged_on_its_key(
        stack: Stack, sandbox: SandboxProc, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url, "--deduplicates")
    saver = SqliteSaver(sqlite3.connect(tmp_path / "agent.sqlite", check_same_thread=False))
    key = "acme/refund/inv-7"
    thread = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:6]}"}}
    with LedgerClient(stack.settings) as client:
        ledger = LedgerMiddleware(client, tenant="acme", graph="observed", version="1",
                                  effects={"issue_refund": Effect("refund", "payments",
                                                                  business_id="invoice")})
        app = create_agent(ScriptedModel(), [issue_refund], middleware=[ledger],
                           checkpointer=saver)
        app.invoke({"messages": [HumanMessage("refund inv-7")]}, thread)
        before_tools = [s for s in app.get_state_history(thread) if s.next == ("tools",)]
        first = before_tools[-1].values["ledger_observations"]["model"]
        replay_before(app, thread, "model")  # the model answers the same
        SAID["text"] = "Sure: inv-7 gets its 12.50 back."
        try:
            replay_before(app, thread, "model")  # the model answers differently
        finally:
            SAID["text"] = "Refunding inv-7 in full, as the customer asked."
        receipts = app.get_state(thread).values["ledger_receipts"]
    assert first["model"] == "scripted-1" and first["size"] > 0 and first["node"] == "model"
    assert receipts[key]["answer"] == "already_done"  # flagged, never blocked
    assert len(sandbox.ledger()["effects"]) == 1
    fresh, same, other = intent_rows(key, stack.settings, capsys)
    assert (fresh["origin"], same["origin"], other["origin"]) == ("fresh", "replay", "replay")
    assert fresh["flag"] is None and same["flag"] is None
    assert other["flag"].startswith("observation_changed: model")
    assert fresh["intent_event_id"] in other["flag"]
    assert fresh["observed"] == same["observed"] != other["observed"]
    assert first["digest"][:12] in fresh["observed"]
    # The view's timeline (GET /v1/timeline/{key}, what the gateway serves) flags the same.
    view = ServedView(stack.settings, tmp_path / "view")
    try:
        url = f"{view.url}/v1/timeline/{quote(key, safe='')}?fresh=1&wait_ms=10000"
        with urllib.request.urlopen(url, timeout=30) as answer:
            served = [r for r in json.loads(answer.read())["rows"] if r["role"] == "intents"]
    finally:
        view.close()
    assert served == [fresh, same, other]
    # The readable timeline says it too, and the evidence has the section.
    assert main(["inspect", key, "--scan", *common(stack.settings)]) == 0
    assert "FLAGGED observation_changed: model" in capsys.readouterr().out
    out = tmp_path / "evidence.json"
    assert main(["evidence", key, "--scan", "--out", str(out), *common(stack.settings)]) == 0
    text = out.read_text()
    section = json.loads(text)["observations"]
    assert [bool(s["changed"]) for s in section] == [False, False, True]
    assert "inv-7 in full" not in text and "12.50 back" not in text  # digests only


class PriceState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    price: float
    ledger_receipts: LedgerReceipts
    ledger_observations: LedgerObservations


PRICE = {"value": 12.5}


def price_graph(client: LedgerClient, saver: SqliteSaver) -> Any:
    @ledger_tool(client, action="refund", target="payments", tenant="acme", graph="prices",
                 version="1", key="invoice")
    def refund(invoice: str) -> dict[str, Any]:
        """Refund an invoice."""
        return {"invoice": invoice}

    @observed(source="prices", model="price-feed-2")
    def look_up_price(state: PriceState) -> dict[str, Any]:
        return {"price": PRICE["value"]}

    def decide(state: PriceState) -> dict[str, Any]:
        call = {"name": "refund", "args": {"invoice": "inv-8"}, "id": uuid.uuid4().hex[:8]}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    graph = StateGraph(PriceState)
    graph.add_node("price", look_up_price)
    graph.add_node("decide", decide)
    graph.add_node("tools", ToolNode([refund]))
    graph.add_edge(START, "price")
    graph.add_edge("price", "decide")
    graph.add_edge("decide", "tools")
    graph.add_edge("tools", END)
    return graph.compile(checkpointer=saver)


def test_an_observed_node_that_read_another_price_is_flagged_on_the_key_that_followed(
        stack: Stack, sandbox: SandboxProc, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url, "--deduplicates")
    saver = SqliteSaver(sqlite3.connect(tmp_path / "graph.sqlite", check_same_thread=False))
    thread = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:6]}"}}
    with LedgerClient(stack.settings) as client:
        app = price_graph(client, saver)
        app.invoke({"messages": [HumanMessage("refund inv-8")]}, thread)
        replay_before(app, thread, "decide")  # after the lookup: its evidence is reused
        PRICE["value"] = 13.0
        try:
            replay_before(app, thread, "price")  # the lookup runs again, another price
        finally:
            PRICE["value"] = 12.5
    assert len(sandbox.ledger()["effects"]) == 1
    fresh, reused, other = intent_rows("acme/refund/inv-8", stack.settings, capsys)
    assert fresh["observed"].startswith("prices price-feed-2 ")
    assert fresh["observed"] == reused["observed"] and reused["flag"] is None
    assert other["flag"].startswith("observation_changed: prices")
