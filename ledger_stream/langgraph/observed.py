"""Observed nodes: steps whose result comes from outside but change nothing there (a model
call, a retrieval, a price lookup), recorded as evidence on the effects that follow.

``@observed(source="prices")`` on a node, or ``LedgerMiddleware`` for every model call of a
``create_agent`` agent, writes the result's observation into the graph state field
``ledger_observations`` (the latest per source): the SHA-256 and size of the result's
canonical encoding, the model or source, the trace, the node and the step, never the
result. The state field is checkpointed with the step, so a run continued from a later
checkpoint carries the evidence recorded before it, and a re-run of the observed step
records what it read this time. Each intent a ``ledger_tool`` or the middleware submits
afterwards in the thread carries the state's observations; the ledger's timeline and
evidence flag an intent whose observation differs from the thread's first one for the key
(``domain/observations.py``). Nothing is blocked: the answer stays the ledger's.

Canonical encoding of LangChain values: a message is its type, its content and its tool
calls' names and arguments (not its id, its tool call ids, usage or response metadata,
which differ on every call); a document its text and metadata; a pydantic model its JSON
dump. So the same answer has the same digest on a re-run, and another answer another.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langgraph.config import get_config
from langgraph.types import Command
from pydantic import BaseModel

from ledger_stream import tracing
from ledger_stream.domain import events as ev
from ledger_stream.domain.observations import MAX_OBSERVATIONS, observation_problem, observe
from ledger_stream.serde.records import from_record, to_record

STATE_FIELD = "ledger_observations"
Node = TypeVar("Node", bound=Callable[..., Any])


def merge_observations(left: dict[str, Any] | None, right: dict[str, Any] | None
                       ) -> dict[str, Any]:
    """Reducer for ``ledger_observations``: the newer observation of each source wins."""
    return {**(left or {}), **(right or {})}


LedgerObservations = Annotated[dict[str, dict[str, Any]], merge_observations]


def normalized(value: Any) -> Any:
    """``value`` as the JSON value its observation is the digest of (module doc). TypeError
    for a value with no JSON form."""
    if isinstance(value, BaseMessage):
        out: dict[str, Any] = {"type": value.type, "content": normalized(value.content)}
        calls = getattr(value, "tool_calls", None) or []
        if calls:
            out["tool_calls"] = [{"name": c["name"], "args": normalized(c["args"])}
                                 for c in calls]
        return out
    if isinstance(value, Document):
        return {"page_content": value.page_content, "metadata": normalized(value.metadata)}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return normalized(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): normalized(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalized(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"an observed result must be JSON-like, not {type(value).__name__}: "
                    "give @observed a select= that picks its JSON part")


def observation(source: str, value: Any, *, model: str = "", trace_id: str = ""
                ) -> dict[str, Any]:
    """The observation of ``value`` made in the running step, as the state keeps it (a
    plain dict, so every checkpoint serializer stores it)."""
    metadata = _step_metadata()
    made = observe(source, normalized(value), model=model,
                   trace_id=tracing.current_trace_id() or trace_id,
                   node=str(metadata.get("langgraph_node") or ""),
                   step=int(metadata.get("langgraph_step", -1)))
    return to_record(made)


def step_observations(state: Any) -> tuple[ev.Observation, ...]:
    """The observations the graph state holds, for the intents of this step (sorted by
    source, so a re-run carries them in the same order; the ``MAX_OBSERVATIONS`` latest by
    step when there are more). A malformed entry is skipped: evidence never stops an effect
    from being asked."""
    held = state.get(STATE_FIELD) if isinstance(state, Mapping) else None
    found = []
    for record in (held or {}).values():
        try:
            made = from_record(ev.Observation, dict(record))
        except (KeyError, TypeError, ValueError):
            continue
        if observation_problem((made,)) is None:
            found.append(made)
    latest = sorted(found, key=lambda o: -o.step)[:MAX_OBSERVATIONS]
    return tuple(sorted(latest, key=lambda o: o.source))


def observed(source: str, *, model: str = "",
             select: Callable[[Any], Any] | None = None) -> Callable[[Node], Node]:
    """Mark a node as observed: its result came from ``source`` (a model, a retrieval, a
    price feed) and changed nothing there. The node's update (or ``select(update)``) is
    recorded as an observation in ``ledger_observations``, which the graph's state must
    declare (``ledger_observations: LedgerObservations``). The node runs unchanged; works
    on sync and async nodes returning a dict or a ``Command`` with a dict update."""

    def record(update: Any) -> Any:
        body = update.update if isinstance(update, Command) else update
        if not isinstance(body, dict):
            raise TypeError(f"@observed({source!r}): the node must return a dict update "
                            f"(or a Command with one), not {type(body).__name__}")
        result = select(body) if select else {k: v for k, v in body.items()
                                              if k != STATE_FIELD}
        try:
            made = observation(source, result, model=model)
        except ValueError:  # no canonical form (a NaN price): evidence never fails the node
            return update
        merged = {**body, STATE_FIELD: {**body.get(STATE_FIELD, {}), source: made}}
        return dataclasses.replace(update, update=merged) if isinstance(update, Command) \
            else merged

    def decorate(node: Node) -> Node:
        if inspect.iscoroutinefunction(node):
            @functools.wraps(node)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                return record(await node(*args, **kwargs))
            return run_async  # type: ignore[return-value]

        @functools.wraps(node)
        def run(*args: Any, **kwargs: Any) -> Any:
            return record(node(*args, **kwargs))
        return run  # type: ignore[return-value]

    return decorate


def _step_metadata() -> Mapping[str, Any]:
    try:
        return get_config().get("metadata") or {}
    except RuntimeError:  # called outside a graph run: no step to name
        return {}
