"""A LangChain 1.x agent middleware (``create_agent(..., middleware=[LedgerMiddleware(...)])``)
that routes every tool call of the agent through the ledger, by default.

Each tool is one of three things, declared when the middleware is built:

- an **effect** (:class:`Effect`): the call becomes an intent. Its arguments are first
  validated and coerced by the tool's own schema, as the tool node would (so ``"12.5"`` and
  ``12.5`` are one amount, and a call missing an argument is a tool error, not an intent).
  Its operation key is built from a *business id* the effect names among the arguments
  (``invoice``, an order id): never the model's tool call id, which a re-run of the model
  node regenerates. Its material arguments are the validated arguments (or the effect's
  ``material`` of them). The
  tool's own function is **not** run: a connector for ``target`` applies the effect, once per
  key, and the ledger's receipt is the tool's result.
- **exempt** (read-only tools, by name): the call runs as the agent would run it.
- **undeclared**: refused with a tool error, nothing submitted and nothing run. An agent
  gains a tool with side effects only by declaring how the ledger keys it.

The receipt comes back as the ToolMessage's content (JSON, no payment details, with
``resolved``), and lands in ``ledger_receipts`` (the state field this middleware adds). The
message's status is ``success`` only for an effect that succeeded. It is ``error`` for:
- a refusal the model should read (a conflict: same business id, other arguments; a held
  or failed effect);
- an effect not settled yet (accepted, in progress, reconciling, waiting for an operator,
  or no answer within ``wait``). The content then says the call is recorded and that
  calling again is safe.

Every model call is an observed step (``langgraph/observed.py``): the answer's digest and
size, the model and the trace go into ``ledger_observations``, and the intents of the tool
calls that follow carry them as evidence, so a replay whose model answered differently is
flagged on the key it asked for (``observe_model=None`` turns this off).

Tool names and schemas are untouched: the model sees the same tools. Tools the model
provider runs itself (built-in tools given as dicts) never reach a tool node, so the
middleware refuses a model call that offers one unless it is declared exempt.

Tested with langchain 1.5.0 on langgraph 1.2.22.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import BaseModel, ValidationError

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import InvalidKeyError, business_id_part, operation_key
from ledger_stream.langgraph.observed import (
    STATE_FIELD,
    LedgerObservations,
    observation,
    step_observations,
)
from ledger_stream.langgraph.origin import step_origin
from ledger_stream.langgraph.tool import NOT_YET, LedgerReceipts, receipt_result
from ledger_stream.sdk.client import LedgerClient
from ledger_stream.sdk.errors import InvalidIntentError, LedgerUnavailable

Handler = Callable[[ToolCallRequest], ToolMessage | Command[Any]]


@dataclass(frozen=True)
class Effect:
    """How the ledger keys and applies one tool's calls.

    ``business_id`` names the argument (or arguments, joined into the key in order) that
    identify the business intent: ``"invoice"`` (each value text or an integer, by the rule
    of ``business_id_part``: surrounding whitespace dropped, Unicode NFC, floats refused).
    ``material`` picks the material arguments from the call's (default: all of them);
    ``payload`` the rest the connector needs but a repeat may change (an e-mail's wording),
    which the ledger does not compare. ``approval`` reads the approval for this call
    from the agent's state and the call's validated arguments, for actions the ledger's
    policy guards (with several calls in one step, each finds its own approval).
    """

    action: str
    target: str
    business_id: str | tuple[str, ...]
    material: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    payload: Callable[[dict[str, Any]], Any] | None = None
    approval: Callable[[Mapping[str, Any], Mapping[str, Any]], ev.Approval | None] | None = None

    def __post_init__(self) -> None:
        names = (self.business_id,) if isinstance(self.business_id, str) else self.business_id
        if not names or not all(isinstance(n, str) and n.strip() for n in names):
            raise ValueError(f"Effect({self.action!r}): business_id must name the argument(s) "
                             "that identify the business object (e.g. business_id=\"invoice\"): "
                             "the operation key is operation_key(tenant, action, <their "
                             "values>), never the tool call id")

    def key(self, tenant: str, args: Mapping[str, Any]) -> str:
        names = (self.business_id,) if isinstance(self.business_id, str) else self.business_id
        missing = [n for n in names if args.get(n) in (None, "")]
        if missing:
            raise InvalidKeyError(f"the call has no {', '.join(missing)} (its business id)")
        return operation_key(tenant, self.action, *(business_id_part(args[n]) for n in names))


class LedgerAgentState(AgentState[Any]):
    """What the middleware adds to the agent's state: the latest receipt summary per key,
    and the latest observation per source (the model's answers)."""

    ledger_receipts: NotRequired[LedgerReceipts]
    ledger_observations: NotRequired[LedgerObservations]


class LedgerMiddleware(AgentMiddleware[LedgerAgentState, Any, Any]):
    """Every tool call through the ledger unless the tool is declared read-only."""

    state_schema = LedgerAgentState

    def __init__(self, client: LedgerClient, *, tenant: str, graph: str, version: str,
                 effects: Mapping[str, Effect], exempt: Iterable[str] = (),
                 wait: float = 30.0, observe_model: str | None = "model") -> None:
        super().__init__()
        both = set(effects) & set(exempt)
        if both:
            raise ValueError(f"tool(s) {', '.join(sorted(both))} declared both as an effect "
                             f"and exempt")
        operation_key(tenant, "check", "check")  # a bad tenant fails here, not per call
        if not (graph.strip() and version.strip()):
            raise ValueError("graph and version must name the workflow (intents carry them)")
        actions: dict[str, str] = {}
        for name, effect in effects.items():
            if effect.action in actions:
                raise ValueError(f"tools {actions[effect.action]!r} and {name!r} share the "
                                 f"action {effect.action!r}: their calls would share keys, "
                                 "and the second would get the first's receipt")
            actions[effect.action] = name
        self.client, self.tenant, self.graph, self.version = client, tenant, graph, version
        self.effects = dict(effects)
        self.exempt = frozenset(exempt)
        self.wait = wait
        self.observe_model = observe_model

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
                        ) -> Any:
        self._refuse_provider_tools(request)
        return self._observed(request, handler(request))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Any]) -> Any:
        self._refuse_provider_tools(request)
        return self._observed(request, await handler(request))

    def _observed(self, request: ModelRequest, answer: Any) -> Any:
        """``answer`` with the observation of the model's messages as a state update."""
        if self.observe_model is None:
            return answer
        extended = answer if isinstance(answer, ExtendedModelResponse) else None
        response = extended.model_response if extended else answer
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        if not isinstance(response, ModelResponse):
            return answer
        last = response.result[-1] if response.result else None
        try:
            made = observation(self.observe_model, response.result,
                               model=_model_name(request, last),
                               trace_id=str(getattr(last, "id", "") or ""))
        except (TypeError, ValueError):  # no canonical form (a NaN in a tool call's args):
            return answer  # evidence never fails the model call, so nothing is observed
        update = {STATE_FIELD: {self.observe_model: made}}
        inner = extended.command if extended else None
        if inner is not None and isinstance(inner.update, dict):
            update = {**inner.update, STATE_FIELD: {**inner.update.get(STATE_FIELD, {}),
                                                    **update[STATE_FIELD]}}
        elif inner is not None:
            return answer  # another middleware's update we cannot merge: keep it whole
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def _refuse_provider_tools(self, request: ModelRequest) -> None:
        """A tool given as a dict runs at the model provider: no tool call reaches us."""
        hidden = [str(t.get("name") or t.get("type")) for t in request.tools
                  if isinstance(t, dict) and (t.get("name") or t.get("type")) not in self.exempt]
        if hidden:
            raise ValueError(f"built-in provider tool(s) {', '.join(hidden)} run outside the "
                             "ledger's reach: declare them exempt (read-only) or remove them")

    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler
                       ) -> ToolMessage | Command[Any]:
        name = request.tool_call["name"]
        if name in self.exempt:
            return handler(request)
        return self._through_ledger(request)

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Any]
                              ) -> ToolMessage | Command[Any]:
        name = request.tool_call["name"]
        if name in self.exempt:
            result: ToolMessage | Command[Any] = await handler(request)
            return result
        # The client is synchronous and thread-safe: the wait runs off the event loop.
        return await asyncio.to_thread(self._through_ledger, request)

    def _through_ledger(self, request: ToolCallRequest) -> ToolMessage | Command[Any]:
        call = request.tool_call
        name, call_id, args = call["name"], str(call.get("id") or ""), dict(call["args"])
        effect = self.effects.get(name)
        if effect is None:
            return _error(call_id, name, f"tool {name!r} is not declared to the ledger: "
                          "declare it as an effect (with its business id) or as read-only; "
                          "nothing was done")
        try:
            args = _validated(request.tool, args)
        except ValidationError as exc:
            return _error(call_id, name, f"invalid arguments for {name}: "
                          f"{_errors(exc)}; nothing was done")
        except ValueError as exc:
            return _error(call_id, name, f"invalid arguments for {name}: {exc}; "
                          "nothing was done")
        try:
            key = effect.key(self.tenant, args)
        except InvalidKeyError as exc:
            return _error(call_id, name, f"{exc}; nothing was done")
        state = request.state if isinstance(request.state, Mapping) else {}
        config = getattr(request.runtime, "config", None) or {}
        thread_id = str(config.get("configurable", {}).get("thread_id", ""))
        where = step_origin(config)
        try:
            intent = self.client.intent(
                key, effect.action, effect.target,
                effect.material(args) if effect.material else args,
                workflow=ev.Workflow(self.graph, self.version, thread_id, "tools",
                                     where.checkpoint_id),
                origin=where.origin, observations=step_observations(state),
                payload=effect.payload(args) if effect.payload else None,
                approval=effect.approval(state, args) if effect.approval else None)
        except (InvalidIntentError, KeyError, TypeError, ValueError) as exc:
            return _error(call_id, name, f"cannot make an intent of this call: {exc}; "
                          "nothing was done")
        try:
            receipt = self.client.submit(intent, self.wait, raise_errors=False)
        except TimeoutError:
            return _error(call_id, name, f"{key}: no answer within {self.wait:g} s; {NOT_YET}")
        except LedgerUnavailable as exc:
            return _error(call_id, name, f"{key}: the ledger cannot be reached ({exc}); "
                          "nothing is known to be done; calling again is safe")
        return receipt_result(receipt, key, call_id, name)


def _model_name(request: ModelRequest, message: Any) -> str:
    """The model that answered: as the provider reported it, else as the agent named it."""
    reported = (getattr(message, "response_metadata", None) or {}).get("model_name")
    named = getattr(request.model, "model_name", None) or getattr(request.model, "model", None)
    return str(reported or named or type(request.model).__name__)[:200]


def _validated(tool: BaseTool | None, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` through the tool's call schema, as JSON values (dates, UUIDs, enums as
    text). A pydantic schema validates and coerces; a JSON schema (a dict, as tools built
    from MCP servers have) is checked for its required arguments only, without coercion,
    so ``"12.5"`` and ``12.5`` stay two argument hashes there (a conflict, never a second
    effect). ValidationError or ValueError say what is wrong."""
    schema = getattr(tool, "tool_call_schema", None) if tool is not None else None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return dict(schema.model_validate(args).model_dump(mode="json"))
    if isinstance(schema, dict):
        missing = [n for n in schema.get("required", ()) if n not in args]
        if missing:
            raise ValueError(f"missing required argument(s) {', '.join(missing)}")
    return args


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                     for e in exc.errors())


def _error(call_id: str, name: str, why: str) -> ToolMessage:
    return ToolMessage(content=json.dumps({"error": why}), tool_call_id=call_id, name=name,
                       status="error")
