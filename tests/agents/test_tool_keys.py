"""``ledger_tool`` keys come only from business identity: ``key=`` is required, the key
function sees only the material arguments, and a regenerated model answer (a new tool call
id) or a copied thread (a new thread id) meets the same key and one effect; a replayed
step reads in ``ledger_receipts`` that its effect was already done.

The graph test runs a real LangGraph graph (StateGraph, ToolNode, a checkpointer, time
travel) on the real broker, processor, HTTP connector and payments sandbox; effects are
counted in the sandbox's own ledger."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream import LedgerClient, operation_key
from ledger_stream.domain.keys import InvalidKeyError
from ledger_stream.langgraph import LedgerReceipts, MissingKeyError, ledger_tool
from ledger_stream.langgraph.tool import business_key

pytestmark = pytest.mark.timeout(240)
SPEC: dict[str, Any] = {"action": "refund", "target": "payments", "tenant": "acme",
                        "graph": "keys", "version": "1"}


def refund_tool(client: Any, **key: Any) -> BaseTool:
    @ledger_tool(client, **SPEC, **key)
    def issue_refund(invoice: str, amount: float) -> dict[str, Any]:
        """Refund an invoice."""
        return {"invoice": invoice, "amount": amount}

    return issue_refund


def test_a_tool_without_key_is_refused_at_decoration_naming_operation_key() -> None:
    with pytest.raises(MissingKeyError) as refused:
        refund_tool(object())
    message = str(refused.value)
    assert "needs key=" in message and "operation_key(" in message
    assert 'key="invoice"' in message  # an example to copy
    assert "tool call ids" in message  # and why the run's ids will not do


def test_a_key_function_is_given_only_the_material_arguments() -> None:
    def with_call(args: dict[str, Any], call: Any) -> str:  # the older signature
        return operation_key("acme", "refund", call.tool_call_id)

    with pytest.raises(MissingKeyError, match="takes one argument, the material arguments"):
        refund_tool(object(), key=with_call)
    for empty in ("", (), ("invoice", " ")):
        with pytest.raises(MissingKeyError, match="names no material argument"):
            refund_tool(object(), key=empty)
    refund_tool(object(), key=lambda args: operation_key("acme", "refund", args["invoice"]))
    refund_tool(object(), key=("invoice",))



def test_one_business_id_written_differently_by_the_model_is_one_key() -> None:
    """42 and "42", surrounding whitespace, and an accent composed or decomposed: one key.
    A float, a boolean or an object is refused before anything is submitted (42.0 beside 42
    would be two keys for one refund)."""
    derive = business_key("invoice", "acme", "refund")
    for written in (42, "42", " 42 "):
        assert derive({"invoice": written, "amount": 1}) == "acme/refund/42"
    assert derive({"invoice": "caf\u00e9-1"}) == derive({"invoice": "cafe\u0301-1"})
    for unusable in (42.0, True, {"id": 42}, ["42"], "a/b", "  "):
        with pytest.raises(InvalidKeyError):
            derive({"invoice": unusable})


def test_a_key_function_cannot_leave_its_tenant_and_action_or_shape() -> None:
    """Checked at each call, before anything is submitted: another tenant's or action's key,
    or text that is not a key, fails the call."""
    for made in ("evil/refund/inv-1", "acme/payout/inv-1", "acme/refund/", "acme/refund",
                 "acme/refund/a\nb", 42):
        derive = business_key(lambda args, made=made: made, "acme", "refund")
        with pytest.raises(InvalidKeyError):
            derive({"invoice": "inv-1"})


def test_decoration_refuses_a_key_that_is_no_function_and_a_bad_tenant() -> None:
    with pytest.raises(MissingKeyError, match="neither argument names nor a function"):
        refund_tool(object(), key=42)
    with pytest.raises(InvalidKeyError):
        ledger_tool(object(), **{**SPEC, "tenant": "ac/me"}, key="invoice")  # type: ignore[arg-type]
    # One required argument, however written, is a key function of the material arguments.
    refund_tool(object(), key=lambda *args: operation_key("acme", "refund", args[0]["invoice"]))
    refund_tool(object(), key=lambda args, extra=None: operation_key("acme", "refund", "x"))


class S(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    ledger_receipts: LedgerReceipts


def model(state: S) -> dict[str, Any]:
    """Stands in for an LLM: each run writes a fresh tool call id, as a regenerated answer
    does."""
    if state["messages"] and state["messages"][-1].type == "tool":
        return {"messages": [AIMessage(content="done")]}
    call = {"name": "issue_refund", "args": {"invoice": "inv-42", "amount": 12.5},
            "id": f"call_{uuid.uuid4().hex}", "type": "tool_call"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def agent(tool: BaseTool) -> Any:
    graph = StateGraph(S)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls
                                else END)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


def tool_call_ids(state: S) -> list[str]:
    return [c["id"] for m in state["messages"] if m.type == "ai" for c in m.tool_calls]


@pytest.mark.parametrize("key", ["invoice", "function"])
def test_a_regenerated_answer_and_a_copied_thread_meet_one_key_and_one_effect(
        stack: Stack, sandbox: SandboxProc, key: str) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
    business = {"key": "invoice"} if key == "invoice" else {
        "key": lambda args: operation_key("acme", "refund", args["invoice"])}
    with LedgerClient(stack.settings) as client:
        app = agent(refund_tool(client, **business))
        first = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:6]}"}}
        app.invoke({"messages": [("user", "refund inv-42")]}, first)
        ids = tool_call_ids(app.get_state(first).values)
        # Regenerate the model's answer: time travel to the checkpoint before the model
        # node ran, so it runs again and writes a new tool call id.
        before_model = next(s for s in app.get_state_history(first)
                            if s.next == ("model",) and not s.values.get("ledger_receipts"))
        app.invoke(None, before_model.config)
        # A copied thread: the same request on another thread id.
        copied = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:6]}"}}
        app.invoke({"messages": [("user", "refund inv-42")]}, copied)
        states = [app.get_state(first).values, app.get_state(copied).values]
    ids += tool_call_ids(states[0]) + tool_call_ids(states[1])
    assert len(set(ids)) == 3  # three model answers, three tool call ids
    (paid,) = sandbox.ledger()["effects"]  # every payment the target made: one
    for values in states:
        (receipt,) = values["ledger_receipts"].values()
        assert receipt["key"] == "acme/refund/inv-42"
        assert (receipt["status"], receipt["external_id"]) == ("succeeded", paid["id"])


def test_a_replayed_step_reads_already_done_with_the_original_effect(
        stack: Stack, sandbox: SandboxProc) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
    with LedgerClient(stack.settings) as client:
        app = agent(refund_tool(client, key="invoice"))
        thread = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:6]}"}}
        app.invoke({"messages": [("user", "refund inv-42")]}, thread)
        made = app.get_state(thread).values["ledger_receipts"]["acme/refund/inv-42"]
        # Time travel: replay from the checkpoint before the tools node ran.
        before_tools = next(s for s in app.get_state_history(thread) if s.next == ("tools",))
        app.invoke(None, before_tools.config)
        replayed = app.get_state(thread).values["ledger_receipts"]["acme/refund/inv-42"]
    (paid,) = sandbox.ledger()["effects"]
    assert (made["state"], made["answer"], made["external_id"]) == (
        "succeeded", "created", paid["id"])
    assert list(made)[:2] == ["state", "answer"]
    assert (replayed["state"], replayed["answer"], replayed["external_id"]) == (
        "succeeded", "already_done", paid["id"])
    assert replayed["origin"] == "replay"
    assert replayed["effect_intent_id"] == made["intent_event_id"]
    assert replayed["intent_event_id"] != made["intent_event_id"]
