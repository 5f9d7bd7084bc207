"""The refund agent: a scripted model asks for a refund, a human approves it, a ToolNode
issues it through the ledger, and the model reports the receipt.

No LLM: ``scripted_model`` stands in for one, and like an LLM it mints a fresh tool call id
each time it runs, which is why the ledger key is derived from the invoice (business
intent), not from the tool call.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt

from ledger_stream import Approval, LedgerClient, operation_key
from ledger_stream.failpoints import failpoint
from ledger_stream.langgraph import LedgerReceipts, ledger_tool

GRAPH = "refund-agent"
VERSION = "1.0"
TENANT = "acme"


class RefundState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    invoice: str
    amount: float
    approval: dict[str, Any] | None
    ledger_receipts: LedgerReceipts


def refund_args(invoice: str, amount: float) -> dict[str, Any]:
    """The material arguments of a refund: what the approval and the ledger bind."""
    return {"invoice": invoice, "amount": amount, "currency": "EUR"}


def refund_key(args: dict[str, Any]) -> str:
    """The refund's operation key: the invoice, never the tool call or thread."""
    return operation_key(TENANT, "refund", args["invoice"])


def ledger_refund_tool(client: LedgerClient, version: str = VERSION) -> BaseTool:
    @ledger_tool(client, action="refund", target="payments", tenant=TENANT, graph=GRAPH,
                 version=version, key=refund_key,
                 approval=lambda state: Approval(**state["approval"])
                 if state.get("approval") else None)
    def issue_refund(invoice: str, amount: float) -> dict[str, Any]:
        """Refund an invoice to the customer's original payment method."""
        return refund_args(invoice, amount)

    return issue_refund


def post_refund(payments_url: str, args: dict[str, Any], timeout_s: float = 10.0) -> str:
    """POST a refund to the payments API as agents usually do: with an idempotency key
    minted per execution (so a re-executed step is a new payment), and no ledger."""
    import urllib.request

    failpoint("before_intent")  # the same crash point as the ledger path: nothing sent
    request = urllib.request.Request(
        payments_url + "/v1/payments", method="POST", data=json.dumps(args).encode(),
        headers={"Content-Type": "application/json",
                 "Idempotency-Key": f"bypass-{args['invoice']}-{uuid.uuid4().hex}"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body = response.read().decode()
    failpoint("after_receipt")  # the same crash point as the ledger path
    return body


def bypass_refund_tool(payments_url: str, timeout_s: float = 10.0) -> BaseTool:
    """The same tool without the ledger, as agents are usually written: it calls the
    payments API directly with an idempotency key minted per execution."""

    @tool
    def issue_refund(invoice: str, amount: float) -> str:
        """Refund an invoice to the customer's original payment method."""
        return post_refund(payments_url, refund_args(invoice, amount), timeout_s)

    return issue_refund


def scripted_model(state: RefundState) -> dict[str, Any]:
    last = state["messages"][-1] if state.get("messages") else None
    if isinstance(last, ToolMessage):
        # The tools step is checkpointed (with durability "sync") before this node runs.
        failpoint("after_graph_update")
        return {"messages": [AIMessage(content=f"Refund outcome: {last.content}")]}
    call = {"name": "issue_refund", "id": f"call_{uuid.uuid4().hex[:12]}",
            "args": {"invoice": state["invoice"], "amount": state["amount"]}}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def human_approval(state: RefundState) -> dict[str, Any]:
    """Pause for a human; the answer is an approval signed by the approval service."""
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    decision = interrupt({"action": "refund", "args": call["args"]})
    return {"approval": decision}


def _after_model(state: RefundState) -> str:
    last = state["messages"][-1]
    return "approval" if getattr(last, "tool_calls", None) else END


def build_graph(refund_tool: BaseTool, checkpointer: Any) -> Any:
    builder = StateGraph(RefundState)
    builder.add_node("model", scripted_model)
    builder.add_node("approval", human_approval)
    builder.add_node("tools", ToolNode([refund_tool]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", _after_model, ["approval", END])
    builder.add_edge("approval", "tools")
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)
