"""The refund agent written as LangChain 1.x agents are: ``create_agent`` with a chat model, a
plain ``@tool`` that calls the payments API, a human-approval middleware, and (with the
ledger) :class:`~ledger_stream.langgraph.LedgerMiddleware` over every tool.

The tool is the one an agent author writes without the ledger: it POSTs the refund with an
idempotency key minted per execution. Bypassed, that is what runs, and a re-run step pays
again. With the ledger, the middleware turns the call into an intent keyed by the invoice
(the tool's declared business id), a connector pays once, and the tool's body never runs.

No LLM: :class:`ScriptedChatModel` reads the user's request (JSON with invoice and amount)
and, like an LLM, mints a fresh tool call id each time it runs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from examples.refund_agent.graph import GRAPH, TENANT, post_refund, refund_args
from ledger_stream import Approval
from ledger_stream.failpoints import failpoint
from ledger_stream.langgraph import Effect, LedgerMiddleware

APPROVAL_NODE = "RefundApproval.after_model"
Material = Callable[[str, float], dict[str, Any]]  # (invoice, amount) -> material arguments


class ScriptedChatModel(BaseChatModel):
    """Asks for the refund the user requested, then reports the tool's answer.

    ``tool_name`` is the refund tool the script calls. With ``parts``, the script asks for
    one refund per ``<invoice>-<part>`` in one message: parallel tool calls, which
    ``create_agent`` runs as tasks of one step.
    """

    tool_name: str = "issue_refund"
    parts: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "scripted-refund-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self  # the script knows its one tool

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        last = messages[-1] if messages else None
        if isinstance(last, ToolMessage):
            # The tools step is checkpointed (with durability "sync") before this runs.
            failpoint("after_graph_update")
            reply = AIMessage(content=f"Refund outcome: {last.content}")
        else:
            request = next(json.loads(str(m.content)) for m in messages
                           if isinstance(m, HumanMessage))
            invoices = [f"{request['invoice']}-{p}" for p in self.parts] or [request["invoice"]]
            reply = AIMessage(content="", tool_calls=[{
                "name": self.tool_name, "id": f"call_{uuid.uuid4().hex[:12]}",
                "args": {"invoice": invoice, "amount": request["amount"]}}
                for invoice in invoices])
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ApprovalState(AgentState[Any]):
    approval: NotRequired[dict[str, Any] | None]
    approvals: NotRequired[dict[str, dict[str, Any]]]  # invoice -> approval, several calls


class RefundApproval(AgentMiddleware[ApprovalState, Any, Any]):
    """Pause for a human once the model asks for a refund; the answer is an approval signed
    by the approval service, kept in state for the ledger to check. When the model asks for
    several refunds at once, the human answers one approval per invoice."""

    state_schema = ApprovalState

    def after_model(self, state: ApprovalState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        calls = getattr(state["messages"][-1], "tool_calls", None)
        if not calls:
            return None
        if len(calls) > 1:
            decisions = interrupt({"action": "refund", "calls": [c["args"] for c in calls]})
            return {"approvals": decisions, "approval": None}
        decision = interrupt({"action": "refund", "args": calls[0]["args"]})
        return {"approval": decision, "approvals": None}  # never an earlier step's


def call_approval(state: Mapping[str, Any], args: Mapping[str, Any]) -> Approval | None:
    """The approval the human gave for this call's invoice."""
    if state.get("approvals"):
        found = state["approvals"].get(args["invoice"])
    else:
        found = state.get("approval")
    return Approval(**found) if found else None


def refund_tool(payments_url: str | None, timeout_s: float = 10.0, name: str = "issue_refund",
                material: Material = refund_args) -> BaseTool:
    """The tool as written without the ledger. With the ledger (``payments_url`` None) the
    middleware must never let it run."""

    @tool(name)
    def issue_refund(invoice: str, amount: float) -> str:
        """Refund an invoice to the customer's original payment method."""
        if payments_url is None:
            raise RuntimeError(f"{name} ran although the ledger middleware owns it")
        return post_refund(payments_url, material(invoice, amount), timeout_s)

    return issue_refund


def ledger_middleware(client: Any, version: str, name: str = "issue_refund",
                      material: Material = refund_args) -> LedgerMiddleware:
    return LedgerMiddleware(client, tenant=TENANT, graph=GRAPH, version=version, effects={
        name: Effect(action="refund", target="payments", business_id="invoice",
                     material=lambda args: material(args["invoice"], args["amount"]),
                     approval=call_approval)})


def build_agent(client: Any, bypass_url: str | None, version: str, checkpointer: Any,
                http_timeout_s: float = 10.0, *, tool_name: str = "issue_refund",
                material: Material = refund_args, parts: tuple[str, ...] = ()) -> Any:
    """The agent; ``tool_name`` and ``material`` are what a version calls its refund tool
    and the arguments it binds, ``parts`` makes the model ask for several refunds at once."""
    middleware: list[AgentMiddleware[Any, Any, Any]] = [RefundApproval()]
    if client is not None:
        middleware.append(ledger_middleware(client, version, tool_name, material))
    model = ScriptedChatModel(tool_name=tool_name, parts=parts)
    return create_agent(model, [refund_tool(bypass_url, http_timeout_s, tool_name, material)],
                        middleware=middleware, checkpointer=checkpointer)


def start_input(invoice: str, amount: float) -> dict[str, Any]:
    """What the user says to start a thread."""
    return {"messages": [HumanMessage(json.dumps({"invoice": invoice, "amount": amount}))]}
