"""The refund agent and the variants the falsification matrix needs (``ledger-stream falsify``).

- ``refund``: the agent of :mod:`examples.refund_agent.graph` (model, approval, tools).
- ``refund-v2``: version 2.0 of the same workflow, incompatible with 1.x: the tools node is
  renamed (``tools`` -> ``payments``) and the refund's material arguments are derived
  differently (the amount in minor units). Same business intent, so the same operation key,
  but another args hash.
- ``refund-v1.1`` (safe: only the version changes), ``refund-v2-renamed`` (only the node
  renamed) and ``refund-v2-amounts`` (only the amount rule): the upgrades
  ``ledger-stream upgrade-check`` is tested with (:mod:`examples.refund_agent.upgrades`).
- ``effect-before-interrupt``: the refund is issued inside a node that then calls
  ``interrupt()`` for a confirmation. LangGraph resumes a node from its top, so resuming (and
  replaying) the node repeats everything before the ``interrupt()``: the refund included.
- ``parallel``: the model asks for two refunds (``<invoice>-a``, ``<invoice>-b``) in one
  message; the two tool calls run as parallel tasks of one step (``Send``), each carrying
  the approval for its own invoice.
- ``functional``: the same workflow in LangGraph's functional API: an ``@entrypoint`` (with
  the checkpointer) asks for the approval with ``interrupt()`` and issues the refund in a
  ``@task``. A task's result is saved when it returns; a crash inside it leaves none, so
  the resumed entrypoint runs the task again.
- ``refund-agent``: the same agent built with LangChain's ``create_agent`` and a plain tool
  (:mod:`examples.refund_agent.agent`), protected by ``LedgerMiddleware`` instead of
  ``ledger_tool``; the user's request is a message, the approval a middleware hook.
- ``refund-agent-v2`` and ``refund-agent-parallel``: ``refund-v2`` and ``parallel`` for the
  ``create_agent`` agent (v2 renames the tool, since create_agent's nodes keep their names).

Each variant applies refunds either through the ledger (``Effects.client``) or directly
against the payments API (``Effects.bypass_url``), to show what the ledger prevents.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Send, interrupt

from examples.refund_agent.graph import (
    GRAPH,
    TENANT,
    VERSION,
    RefundState,
    _after_model,
    build_graph,
    bypass_refund_tool,
    human_approval,
    ledger_refund_tool,
    post_refund,
    refund_args,
    refund_key,
    scripted_model,
)
from ledger_stream import Approval, LedgerClient
from ledger_stream.domain import events as ev
from ledger_stream.failpoints import failpoint
from ledger_stream.langgraph import ledger_tool, receipt_summary

Material = Callable[[str, float], dict[str, Any]]
AGENT_APPROVAL_NODE = "RefundApproval.after_model"  # examples.refund_agent.agent.APPROVAL_NODE


@dataclass(frozen=True)
class Effects:
    """How a graph applies refunds: through the ledger, or straight to the payments API."""

    client: LedgerClient | None
    bypass_url: str | None
    version: str
    http_timeout_s: float = 10.0

    def refund(self, args: dict[str, Any], state: dict[str, Any], thread_id: str,
               node: str) -> dict[str, Any]:
        """Apply one refund from inside a node (not a tool); returns what the target or
        the ledger answered."""
        if self.client is None:
            assert self.bypass_url
            return dict(json.loads(post_refund(self.bypass_url, args, self.http_timeout_s)))
        intent = self.client.intent(
            refund_key(args), "refund", "payments", args,
            workflow=ev.Workflow(GRAPH, self.version, thread_id, node),
            approval=_state_approval(state))
        return receipt_summary(self.client.submit(intent, 30.0, raise_errors=False))


def _state_approval(state: dict[str, Any]) -> Approval | None:
    return Approval(**state["approval"]) if state.get("approval") else None


def _state_input(invoice: str, amount: float) -> dict[str, Any]:
    return {"invoice": invoice, "amount": amount, "messages": []}


@dataclass(frozen=True)
class Variant:
    name: str
    version: str
    effect_node: str  # the node a replay or fork restarts from
    material: Material  # the arguments an approval binds, from (invoice, amount)
    build: Callable[[Effects, Any], Any]  # (effects, checkpointer) -> compiled graph
    approval_node: str = "approval"  # the node a fork's edited tool call is written as
    start_input: Callable[[str, float], dict[str, Any]] = _state_input  # a thread's input


# --- refund (1.x) ---------------------------------------------------------------------------


def _build_refund(fx: Effects, checkpointer: Any) -> Any:
    refund_tool = ledger_refund_tool(fx.client, fx.version) if fx.client else \
        bypass_refund_tool(fx.bypass_url or "", fx.http_timeout_s)
    return build_graph(refund_tool, checkpointer)


# --- refund v2: renamed node, arguments derived differently ----------------------------------


def refund_args_v2(invoice: str, amount: float) -> dict[str, Any]:
    """Version 2 binds the amount in minor units: another args hash for the same refund.
    An amount finer than a cent is refused, never rounded into another refund's."""
    cents = Decimal(str(amount)) * 100
    if cents != cents.to_integral_value():
        raise ValueError(f"amount {amount} has more than two decimals")
    return {"invoice": invoice, "amount_minor": int(cents), "currency": "EUR"}


def _v2_tool(fx: Effects) -> BaseTool:
    if fx.client is None:
        url, timeout_s = fx.bypass_url or "", fx.http_timeout_s

        @tool
        def issue_refund(invoice: str, amount: float) -> str:
            """Refund an invoice to the customer's original payment method."""
            return post_refund(url, refund_args_v2(invoice, amount), timeout_s)

        return issue_refund

    @ledger_tool(fx.client, action="refund", target="payments", tenant=TENANT, graph=GRAPH,
                 version=fx.version, key=refund_key, approval=_state_approval)
    def issue_refund(invoice: str, amount: float) -> dict[str, Any]:  # noqa: F811
        """Refund an invoice to the customer's original payment method."""
        return refund_args_v2(invoice, amount)

    return issue_refund


def _build_v2(fx: Effects, checkpointer: Any) -> Any:
    return _renamed_graph(_v2_tool(fx), checkpointer)


def _renamed_graph(refund_tool: BaseTool, checkpointer: Any) -> Any:
    """The refund agent with its tools node renamed ``payments``."""
    builder = StateGraph(RefundState)
    builder.add_node("model", scripted_model)
    builder.add_node("approval", human_approval)
    builder.add_node("payments", ToolNode([refund_tool]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", _after_model, ["approval", END])
    builder.add_edge("approval", "payments")
    builder.add_edge("payments", "model")
    return builder.compile(checkpointer=checkpointer)


# --- the three upgrades `ledger-stream upgrade-check` is tested with (upgrades.py) ----------


def _build_renamed(fx: Effects, checkpointer: Any) -> Any:
    """2.0, only the tools node renamed (``tools`` -> ``payments``): the same arguments."""
    refund_tool = ledger_refund_tool(fx.client, fx.version) if fx.client else \
        bypass_refund_tool(fx.bypass_url or "", fx.http_timeout_s)
    return _renamed_graph(refund_tool, checkpointer)


def _build_amounts(fx: Effects, checkpointer: Any) -> Any:
    """2.0, only the amount rule changed (minor units): the same nodes, other arguments."""
    return build_graph(_v2_tool(fx), checkpointer)


# --- effect before interrupt() in one node ---------------------------------------------------


def _build_effect_before_interrupt(fx: Effects, checkpointer: Any) -> Any:
    def refund_then_confirm(state: RefundState, config: RunnableConfig) -> dict[str, Any]:
        thread_id = str(config.get("configurable", {}).get("thread_id", ""))
        args = refund_args(state["invoice"], state["amount"])
        answer = fx.refund(args, dict(state), thread_id, "refund_then_confirm")
        # Everything above runs again when this node is resumed: LangGraph restarts a node
        # from its top and only then hands interrupt() the resume value.
        confirmation = interrupt({"action": "confirm", "refund": answer})
        update: dict[str, Any] = {"messages": [AIMessage(
            content=f"Refund {json.dumps(answer)} confirmed: {json.dumps(confirmation)}")]}
        if fx.client is not None:
            update["ledger_receipts"] = {answer["key"]: answer}
        return update

    builder = StateGraph(RefundState)
    builder.add_node("model", scripted_model)
    builder.add_node("approval", human_approval)
    builder.add_node("refund_then_confirm", refund_then_confirm)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", _after_model, ["approval", END])
    builder.add_edge("approval", "refund_then_confirm")
    builder.add_edge("refund_then_confirm", END)
    return builder.compile(checkpointer=checkpointer)


# --- two parallel tool calls in one step -----------------------------------------------------


class ParallelState(RefundState, total=False):
    approvals: dict[str, dict[str, Any]]  # invoice -> approval


def _parallel_model(state: ParallelState) -> dict[str, Any]:
    last = state["messages"][-1] if state.get("messages") else None
    if isinstance(last, ToolMessage):
        failpoint("after_graph_update")
        return {"messages": [AIMessage(content="Refunds issued")]}
    calls = [{"name": "issue_refund", "id": f"call_{uuid.uuid4().hex[:12]}",
              "args": {"invoice": f"{state['invoice']}-{part}", "amount": state["amount"]}}
             for part in ("a", "b")]
    return {"messages": [AIMessage(content="", tool_calls=calls)]}


def _parallel_approval(state: ParallelState) -> dict[str, Any]:
    calls = state["messages"][-1].tool_calls  # type: ignore[union-attr]
    decision = interrupt({"action": "refund", "calls": [c["args"] for c in calls]})
    return {"approvals": decision}


def _each_call(state: ParallelState) -> list[Send]:
    """One task per tool call, in one step; each sees the approval of its own invoice."""
    message = state["messages"][-1]
    return [Send("tools", {
        "__type": "tool_call_with_context", "tool_call": {**call, "type": "tool_call"},
        "state": {**state, "approval": state["approvals"][call["args"]["invoice"]]},
    }) for call in message.tool_calls]  # type: ignore[union-attr]


def _build_parallel(fx: Effects, checkpointer: Any) -> Any:
    refund_tool = ledger_refund_tool(fx.client, fx.version) if fx.client else \
        bypass_refund_tool(fx.bypass_url or "", fx.http_timeout_s)
    builder = StateGraph(ParallelState)
    builder.add_node("model", _parallel_model)
    builder.add_node("approval", _parallel_approval)
    builder.add_node("tools", ToolNode([refund_tool]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", _after_model, ["approval", END])
    builder.add_conditional_edges("approval", _each_call, ["tools"])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


# --- the functional API: @entrypoint and @task ------------------------------------------------


def _build_functional(fx: Effects, checkpointer: Any) -> Any:
    from langgraph.func import entrypoint, task

    @task
    def issue_refund(args: dict[str, Any], approval: dict[str, Any],
                     thread_id: str) -> dict[str, Any]:
        return fx.refund(args, {"approval": approval}, thread_id, "issue_refund")

    @entrypoint(checkpointer=checkpointer)
    def refund_workflow(request: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        thread_id = str(config.get("configurable", {}).get("thread_id", ""))
        asked = {"invoice": request["invoice"], "amount": request["amount"]}
        approval = interrupt({"action": "refund", "args": asked})
        answer = issue_refund(refund_args(**asked), approval, thread_id).result()
        receipts = {answer["key"]: answer} if fx.client is not None else {}
        return {"ledger_receipts": receipts, "refund": answer}

    return refund_workflow


def _functional_input(invoice: str, amount: float) -> dict[str, Any]:
    return {"invoice": invoice, "amount": amount}


def _build_agent(fx: Effects, checkpointer: Any) -> Any:
    from examples.refund_agent import agent

    return agent.build_agent(fx.client, fx.bypass_url, fx.version, checkpointer,
                             fx.http_timeout_s)


def _build_agent_v2(fx: Effects, checkpointer: Any) -> Any:
    """Version 2.0 of the create_agent agent: the refund tool is renamed (``issue_refund``
    -> ``refund_invoice``; create_agent's nodes keep their names, so the tool is what a new
    version renames) and binds the amount in minor units."""
    from examples.refund_agent import agent

    return agent.build_agent(fx.client, fx.bypass_url, fx.version, checkpointer,
                             fx.http_timeout_s, tool_name="refund_invoice",
                             material=refund_args_v2)


def _build_agent_parallel(fx: Effects, checkpointer: Any) -> Any:
    """The create_agent agent whose model asks for two refunds in one message."""
    from examples.refund_agent import agent

    return agent.build_agent(fx.client, fx.bypass_url, fx.version, checkpointer,
                             fx.http_timeout_s, parts=("a", "b"))


def _agent_input(invoice: str, amount: float) -> dict[str, Any]:
    from examples.refund_agent import agent

    return agent.start_input(invoice, amount)


VARIANTS = {v.name: v for v in (
    Variant("refund", VERSION, "tools", refund_args, _build_refund),
    Variant("refund-v2", "2.0", "payments", refund_args_v2, _build_v2),
    Variant("refund-v1.1", "1.1", "tools", refund_args, _build_refund),
    Variant("refund-v2-renamed", "2.0", "payments", refund_args, _build_renamed),
    Variant("refund-v2-amounts", "2.0", "tools", refund_args_v2, _build_amounts),
    Variant("effect-before-interrupt", VERSION, "refund_then_confirm", refund_args,
            _build_effect_before_interrupt),
    Variant("parallel", VERSION, "tools", refund_args, _build_parallel),
    Variant("functional", VERSION, "issue_refund", refund_args, _build_functional,
            start_input=_functional_input),
    Variant("refund-agent", VERSION, "tools", refund_args, _build_agent,
            approval_node=AGENT_APPROVAL_NODE, start_input=_agent_input),
    Variant("refund-agent-v2", "2.0", "tools", refund_args_v2, _build_agent_v2,
            approval_node=AGENT_APPROVAL_NODE, start_input=_agent_input),
    Variant("refund-agent-parallel", VERSION, "tools", refund_args, _build_agent_parallel,
            approval_node=AGENT_APPROVAL_NODE, start_input=_agent_input),
)}
