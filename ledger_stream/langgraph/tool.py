"""A LangGraph tool whose effect goes through the ledger: applied once per operation key,
however often the graph re-runs the step (resume, replay, fork, retry, two workers).

The decorated function does not perform the effect: it returns the effect's *material
arguments*. The wrapper derives the operation key, submits the intent, and returns the
ledger's receipt into graph state (a ToolMessage, plus ``ledger_receipts[key]``). A
connector applies the effect; the same key always gets the original receipt back. The
ToolMessage is a success only for a succeeded effect; an effect not settled yet and a
refusal are tool errors saying so (``receipt_result``, LedgerMiddleware's answer too).

Keys come only from business identity, and ``key=`` is required: the names of the material
arguments that identify the business object (``key="invoice"``), or a function of the
material arguments returning ``operation_key(tenant, action, <business id>)``. The key
function sees nothing else: no thread id, tool call id, run id or checkpoint id, since a
regenerated model answer mints a new tool call id, a copied thread a new thread id, and a
replay new run and checkpoint ids, and each would be a new key for the same refund: the
duplicate the ledger exists to stop.

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
from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import (
    InvalidKeyError,
    business_id_part,
    checked_key,
    operation_key,
)
from ledger_stream.history.detail import shown_detail
from ledger_stream.langgraph.observed import step_observations
from ledger_stream.langgraph.origin import step_origin
from ledger_stream.sdk.client import PENDING as PENDING_STATUSES
from ledger_stream.sdk.client import LedgerClient

PENDING = {"accepted", "in_progress", "reconciling"}
NOT_YET = ("not settled yet: the call is recorded and the ledger will apply it at most "
           "once; call the tool again with the same arguments to ask, it is safe")
FROZEN_NOTE = ("the action is frozen by an operator: the ledger applies it once, after the "
               "unfreeze; do not retry it another way")
VERSION_NOTE = ("an earlier version of this workflow has this key's effect in flight: ask "
                "again later with the same arguments; do not retry it another way")
NOT_DONE = ("not done: the ledger refused this call or its effect failed (see reason and "
            "detail); do not report it as done")


# A receipt with one of these says nothing about the effect's outcome yet.
UNSETTLED = PENDING_STATUSES | {ev.ReceiptStatus.NEEDS_RECONCILIATION}


KeyFunction = Callable[[dict[str, Any]], str]
KeySpec = str | tuple[str, ...] | KeyFunction
KEY_EXAMPLE = ('key="invoice" (the material argument naming the business object), or '
               'key=lambda args: operation_key("acme", "refund", args["invoice"])')


class MissingKeyError(TypeError):
    """``ledger_tool`` without a business key: the message says how to give one."""


def receipt_summary(receipt: ev.Receipt, asker: str | None = None) -> dict[str, Any]:
    """The JSON-able view of a receipt kept in graph state (no payment details), as the
    answer to the intent ``asker`` (default: the one the receipt answers). It leads with
    ``state``, the key's, and ``answer``, what that intent got: ``created`` (its effect),
    ``already_done`` (an earlier intent's: on a replay, resume or fork, the step's effect
    exists from before), ``rejected``, ``held`` or ``pending``."""
    asker = asker or receipt.intent_event_id
    return {
        "state": receipt.key_status.value, "answer": receipt.answer_to(asker).value,
        "key": receipt.key, "status": receipt.status.value, "key_status":
        receipt.key_status.value, "reason": receipt.reason.value,
        "external_id": receipt.external_id, "attempts": receipt.attempts,
        "intent_event_id": asker, "effect_intent_id": receipt.effect_intent_id,
        "detail": shown_detail(receipt.detail),
        "origin": receipt.origin,
    }


def receipt_result(receipt: ev.Receipt, key: str, tool_call_id: str,
                   name: str | None = None) -> Command:
    """The tool result of ``receipt`` (``ledger_tool`` and ``LedgerMiddleware`` alike): a
    ToolMessage whose content is the receipt's summary with ``resolved`` (false while the
    effect's outcome is not settled: accepted, in progress, reconciling, held by a freeze or
    behind an earlier workflow version's effect, waiting for an operator) and, unless it
    succeeded, a ``note`` saying what to do; and the summary in ``ledger_receipts[key]``.
    Its status is ``success`` only for a succeeded effect (this call's or, on a repeat, the
    original's): every other answer is an error the model reads, never a "done" for an
    effect nobody knows happened."""
    # Held: by a freeze (applied after the unfreeze) or behind an earlier workflow
    # version's effect in flight for the key (a hostile review found it called resolved).
    held = receipt.status is ev.ReceiptStatus.HELD
    resolved = receipt.status not in UNSETTLED and not held
    summary = receipt_summary(receipt)
    content = {**summary, "resolved": resolved}
    succeeded = receipt.status is ev.ReceiptStatus.SUCCEEDED
    if not resolved:
        content["note"] = NOT_YET
        if held:
            why = FROZEN_NOTE if receipt.reason is ev.Reason.FROZEN else VERSION_NOTE
            content["note"] = f"{NOT_YET}; {why}"
    elif not succeeded:
        content["note"] = NOT_DONE
    message = ToolMessage(content=json.dumps(content), tool_call_id=tool_call_id, name=name,
                          status="success" if succeeded else "error")
    return Command(update={"messages": [message], "ledger_receipts": {key: summary}})


def merge_receipts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for ``ledger_receipts``: the newer summary of each key wins."""
    return {**(left or {}), **(right or {})}


LedgerReceipts = Annotated[dict[str, dict[str, Any]], merge_receipts]


def ledger_tool(client: LedgerClient, *, action: str, target: str, tenant: str,
                graph: str, version: str, key: KeySpec | None = None,
                approval: Callable[[dict[str, Any]], ev.Approval | None] | None = None,
                wait: float = 30.0) -> Callable[[Callable[..., dict[str, Any]]], BaseTool]:
    """Decorate a function returning material arguments into a ledger-protected tool.

    ``key`` names the material argument(s) that identify the business object (joined into
    ``operation_key(tenant, action, *values)`` in order; each value text or an integer, by
    the rule of ``business_id_part``), or
    is a function of the material arguments returning the whole key. Without it this raises
    MissingKeyError here, at decoration time. A key of another tenant or action fails the
    call before anything is submitted.

    ``approval(state)`` returns the approval held in graph state (for actions the ledger's
    policy guards); the ledger checks it is bound to exactly these arguments.
    """

    derive_key = business_key(key, tenant, action)

    def decorate(fn: Callable[..., dict[str, Any]]) -> BaseTool:
        @functools.wraps(fn)
        def run(*args: Any, tool_call_id: str, config: RunnableConfig,
                state: dict[str, Any], **kwargs: Any) -> Command:
            material = fn(*args, **kwargs)
            thread_id = str(config.get("configurable", {}).get("thread_id", ""))
            op_key = derive_key(material)
            where = step_origin(config)
            intent = client.intent(op_key, action, target, material,
                                   workflow=ev.Workflow(graph, version, thread_id, fn.__name__,
                                                        where.checkpoint_id),
                                   approval=approval(state) if approval else None,
                                   origin=where.origin,
                                   observations=step_observations(state))
            # No receipt within ``wait`` (TimeoutError) or no ledger (LedgerUnavailable):
            # the step fails and its checkpoint keeps it; resuming asks again, safely.
            receipt = client.submit(intent, wait, raise_errors=False)
            return receipt_result(receipt, op_key, tool_call_id)

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


def business_key(key: KeySpec | None, tenant: str, action: str) -> KeyFunction:
    """The key function ``key`` stands for; MissingKeyError (saying how) when it cannot be
    one. Keys are checked to be ``tenant/action/...`` when derived."""
    if key is None:
        raise MissingKeyError(
            f"ledger_tool(action={action!r}) needs key=: the operation key must come from "
            f"business identity, built with operation_key(tenant, action, <business id>): "
            f"{KEY_EXAMPLE}. Thread ids, tool call ids and run ids change when a model "
            "answer is regenerated or a thread copied, and a new key is a second effect")
    operation_key(tenant, action, "check")  # a bad tenant or action fails here
    if isinstance(key, str | tuple):
        names = (key,) if isinstance(key, str) else key
        if not names or not all(isinstance(n, str) and n.strip() for n in names):
            raise MissingKeyError(f"key={key!r} names no material argument: {KEY_EXAMPLE}")
        return functools.partial(_named_key, tenant, action, names)
    if not callable(key):
        raise MissingKeyError(f"key={key!r} is neither argument names nor a function: "
                              f"{KEY_EXAMPLE}")
    if _positional_count(key) != 1:
        raise MissingKeyError(
            "key= takes one argument, the material arguments, and returns "
            f"operation_key(tenant, action, <business id>): {KEY_EXAMPLE}. It is not given "
            "the thread or tool call id: keys come only from business identity")
    return functools.partial(_checked_key, key, f"{tenant}/{action}/")


def _named_key(tenant: str, action: str, names: tuple[str, ...],
               material: dict[str, Any]) -> str:
    missing = [n for n in names if material.get(n) in (None, "")]
    if missing:
        raise InvalidKeyError(f"the material arguments have no {', '.join(missing)} "
                              "(the business id the key is made of)")
    return operation_key(tenant, action, *(business_id_part(material[n]) for n in names))


def _checked_key(key: KeyFunction, prefix: str, material: dict[str, Any]) -> str:
    made = key(material)
    if not (isinstance(made, str) and made.startswith(prefix)):
        raise InvalidKeyError(f"key function returned {made!r}, not a key under {prefix}: "
                              "build it with operation_key(tenant, action, <business id>)")
    return checked_key(made)


def _positional_count(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` requires (1 when it takes any number)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               and p.default is p.empty)
