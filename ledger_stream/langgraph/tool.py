"""A LangGraph tool whose effect goes through the ledger: applied once per operation key,
however often the graph re-runs the step (resume, replay, fork, retry, two workers).

The decorated function does not perform the effect: it returns the effect's *material
arguments*. The wrapper derives the operation key, submits the intent, and returns the
ledger's receipt into graph state (a ToolMessage, plus ``ledger_receipts[key]``). A
connector applies the effect; the same key always gets the original receipt back.

Keys. Pass ``key=`` to derive the key from business intent (``invoice-881``): that survives
even a re-run of the model node that regenerates tool call ids. Without it, the key is
``tenant/action/<thread id>/<tool call id>``: stable across resume, replay and fork of
checkpoints that hold the model's tool call, but not across a regenerated model answer.
Never checkpoint ids, task ids or step numbers, which change on every replay.

Origin. Each intent says which kind of run asked (``fresh``, ``resume``, ``replay``,
``fork``) and the checkpoint behind it, read from the step's config (origin.py), so the
ledger's receipts, timelines and conflict alerts name the re-run that repeated an effect.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import operation_key
from ledger_stream.langgraph.origin import step_origin
from ledger_stream.sdk.client import LedgerClient

PENDING = {"accepted", "in_progress", "reconciling"}
FROZEN_NOTE = ("the action is frozen by an operator: the call is recorded and the ledger "
               "applies it once, after the unfreeze; do not retry it another way")


@dataclass(frozen=True)
class ToolCall:
    """What the key function may use besides the material arguments."""

    thread_id: str
    tool_call_id: str
    state_intent_id: str | None = None


KeyFunction = Callable[[dict[str, Any], ToolCall], str]


def receipt_summary(receipt: ev.Receipt) -> dict[str, Any]:
    """The JSON-able view of a receipt kept in graph state (no payment details)."""
    return {
        "key": receipt.key, "status": receipt.status.value, "key_status":
        receipt.key_status.value, "reason": receipt.reason.value,
        "external_id": receipt.external_id, "attempts": receipt.attempts,
        "intent_event_id": receipt.intent_event_id, "detail": receipt.detail,
        "origin": receipt.origin,
    }


def merge_receipts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for ``ledger_receipts``: the newer summary of each key wins."""
    return {**(left or {}), **(right or {})}


LedgerReceipts = Annotated[dict[str, dict[str, Any]], merge_receipts]


def ledger_tool(client: LedgerClient, *, action: str, target: str, tenant: str,
                graph: str, version: str, key: KeyFunction | None = None,
                approval: Callable[[dict[str, Any]], ev.Approval | None] | None = None,
                wait: float = 30.0) -> Callable[[Callable[..., dict[str, Any]]], BaseTool]:
    """Decorate a function returning material arguments into a ledger-protected tool.

    ``approval(state)`` returns the approval held in graph state (for actions the ledger's
    policy guards); the ledger checks it is bound to exactly these arguments.
    """

    def decorate(fn: Callable[..., dict[str, Any]]) -> BaseTool:
        def derive_key(material: dict[str, Any], call: ToolCall) -> str:
            if key is not None:
                return key(material, call)
            return operation_key(tenant, action, call.thread_id, call.tool_call_id)

        @functools.wraps(fn)
        def run(*args: Any, tool_call_id: str, config: RunnableConfig,
                state: dict[str, Any], **kwargs: Any) -> Command:
            material = fn(*args, **kwargs)
            thread_id = str(config.get("configurable", {}).get("thread_id", ""))
            op_key = derive_key(material, ToolCall(thread_id, tool_call_id))
            where = step_origin(config)
            intent = client.intent(op_key, action, target, material,
                                   workflow=ev.Workflow(graph, version, thread_id, fn.__name__,
                                                        where.checkpoint_id),
                                   approval=approval(state) if approval else None,
                                   origin=where.origin)
            receipt = client.submit(intent, wait, raise_errors=False)
            summary = receipt_summary(receipt)
            refused = receipt.status in (ev.ReceiptStatus.REJECTED, ev.ReceiptStatus.HELD,
                                         ev.ReceiptStatus.FAILED)
            if receipt.status is ev.ReceiptStatus.HELD and receipt.reason is ev.Reason.FROZEN:
                summary["note"] = FROZEN_NOTE
            message = ToolMessage(content=json.dumps(summary), tool_call_id=tool_call_id,
                                  status="error" if refused else "success")
            return Command(update={"messages": [message], "ledger_receipts": {op_key: summary}})

        signature = inspect.signature(fn)
        injected = [
            inspect.Parameter("tool_call_id", inspect.Parameter.KEYWORD_ONLY,
                              annotation=Annotated[str, InjectedToolCallId]),
            inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY,
                              annotation=RunnableConfig),
            inspect.Parameter("state", inspect.Parameter.KEYWORD_ONLY,
                              annotation=Annotated[dict, InjectedState]),
        ]
        run.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*signature.parameters.values(), *injected],
            return_annotation=Command)
        run.__annotations__ = {**typing.get_type_hints(fn, include_extras=True), "tool_call_id":
                               Annotated[str, InjectedToolCallId], "config": RunnableConfig,
                               "state": Annotated[dict, InjectedState], "return": Command}
        return StructuredTool.from_function(run, name=fn.__name__,
                                            description=inspect.getdoc(fn) or fn.__name__)

    return decorate
