"""``@observed`` and the canonical form of LangChain results (langgraph/observed.py),
without a broker: the same answer digests the same whatever its message and tool call ids,
another answer differently; the decorator adds the observation to a dict or a Command's
update, sync or async, inside a graph (with its node and step) and outside one; the state's
observations reach intents sorted, a malformed entry skipped; LedgerMiddleware (sync and
async, with a recording client) puts the model's answer on the intent that follows."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from ledger_stream import LedgerClient
from ledger_stream.domain import events as ev
from ledger_stream.domain.observations import MAX_OBSERVATIONS, observation_problem, observe
from ledger_stream.langgraph import Effect, LedgerMiddleware, LedgerObservations, observed
from ledger_stream.langgraph.observed import normalized, observation, step_observations


def answer(text: str, call_id: str, message_id: str) -> AIMessage:
    return AIMessage(text, id=message_id, tool_calls=[
        {"name": "issue_refund", "args": {"invoice": "inv-1", "amount": 12.5}, "id": call_id}],
        usage_metadata={"input_tokens": 9, "output_tokens": 3, "total_tokens": 12})


def test_a_message_digests_without_its_ids_and_usage() -> None:
    a = observation("model", [answer("refund it", "call_1", "run-1")])
    b = observation("model", [answer("refund it", "call_2", "run-2")])
    c = observation("model", [answer("refund it now", "call_1", "run-1")])
    assert a["digest"] == b["digest"] != c["digest"]
    assert normalized(answer("x", "c", "m")) == {"type": "ai", "content": "x", "tool_calls": [
        {"name": "issue_refund", "args": {"invoice": "inv-1", "amount": 12.5}}]}
    assert normalized(Document("text", metadata={"source": "kb"})) == {
        "page_content": "text", "metadata": {"source": "kb"}}


def test_a_result_with_no_json_form_says_to_select_a_part() -> None:
    with pytest.raises(TypeError, match="select="):
        normalized(object())


class S(TypedDict, total=False):
    price: float
    ledger_observations: LedgerObservations


def test_an_observed_node_records_its_update_with_node_and_step() -> None:
    @observed(source="prices", model="feed-2")
    def price(state: S) -> dict[str, Any]:
        return {"price": 12.5}

    graph = StateGraph(S)
    graph.add_node("price", price)
    graph.add_edge(START, "price")
    graph.add_edge("price", END)
    values = graph.compile().invoke({})
    made = values["ledger_observations"]["prices"]
    expected = observe("prices", {"price": 12.5})
    assert (made["digest"], made["size"]) == (expected.digest, expected.size)
    assert (made["model"], made["node"], made["step"]) == ("feed-2", "price", 1)
    assert values["price"] == 12.5


def test_commands_async_nodes_and_select() -> None:
    @observed(source="docs", select=lambda update: update["found"])
    async def retrieve(state: S) -> Command[Any]:
        return Command(update={"found": ["a", "b"]})

    result = asyncio.run(retrieve({}))
    assert isinstance(result, Command)
    assert result.update["found"] == ["a", "b"]
    assert result.update["ledger_observations"]["docs"]["digest"] == observe(
        "docs", ["a", "b"]).digest
    assert result.update["ledger_observations"]["docs"]["step"] == -1  # outside a graph

    @observed(source="docs")
    def wrong(state: S) -> list[str]:
        return ["not an update"]

    with pytest.raises(TypeError, match="dict update"):
        wrong({})


def test_the_states_observations_reach_intents_sorted_and_a_malformed_one_is_skipped() -> None:
    state = {"ledger_observations": {
        "prices": observation("prices", 1), "model": observation("model", "a"),
        "broken": {"source": "broken"}}}
    assert [o.source for o in step_observations(state)] == ["model", "prices"]
    assert step_observations({}) == () and step_observations(None) == ()


def test_evidence_never_makes_an_intent_invalid() -> None:
    """More sources than an intent may carry: the latest by step; an overlong model name
    cut; a forged digest in the state skipped."""
    many = {f"s{i:02}": {**observation(f"s{i:02}", i), "step": i} for i in range(20)}
    many["forged"] = {**observation("forged", 1), "digest": "not hex", "step": 99}
    kept = step_observations({"ledger_observations": many})
    assert [o.source for o in kept] == [f"s{i:02}" for i in range(20 - MAX_OBSERVATIONS, 20)]
    assert observation_problem(kept) is None
    long = observation("model", "a", model="m" * 1_000, trace_id="t" * 1_000)
    assert observation_problem(step_observations({"ledger_observations": {"model": long}})
                               ) is None


class ScriptedModel(BaseChatModel):
    """Answers ``text`` with one refund call, then "done" once the tool answered."""

    text: str = "refunding inv-3"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])
        call = {"name": "issue_refund", "args": {"invoice": "inv-3"}, "id": "call_1"}
        return ChatResult(generations=[ChatGeneration(
            message=AIMessage(self.text, tool_calls=[call]))])


class Recorder:
    """The two LedgerClient calls the middleware makes; every intent answered succeeded."""

    def __init__(self) -> None:
        self.intents: list[ev.Intent] = []

    def intent(self, key: str, action: str, target: str, args: Any, **kw: Any) -> ev.Intent:
        return LedgerClient.intent(self, key, action, target, args, **kw)  # type: ignore[arg-type]

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        self.intents.append(intent)
        return ev.Receipt("r", intent.key, intent.event_id, ev.ReceiptStatus.SUCCEEDED,
                          ev.Reason.NONE, intent.args_hash, 1, 1,
                          key_status=ev.ReceiptStatus.SUCCEEDED)


@tool
def issue_refund(invoice: str) -> str:
    """Refund an invoice."""
    raise AssertionError("never runs under the middleware")


@pytest.mark.parametrize("run", ["sync", "async"])
def test_the_middleware_puts_the_models_answer_on_the_intents_that_follow(run: str) -> None:
    recorder = Recorder()
    ledger = LedgerMiddleware(recorder, tenant="acme", graph="g", version="1",  # type: ignore[arg-type]
                              effects={"issue_refund": Effect("refund", "payments",
                                                              business_id="invoice")})
    agent = create_agent(ScriptedModel(), [issue_refund], middleware=[ledger],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    start = {"messages": [HumanMessage("refund inv-3")]}
    if run == "sync":
        agent.invoke(start, config)
    else:
        asyncio.run(agent.ainvoke(start, config))
    (intent,) = recorder.intents
    (seen,) = intent.observations
    said = observation("model", [AIMessage("refunding inv-3", tool_calls=[
        {"name": "issue_refund", "args": {"invoice": "inv-3"}, "id": "other"}])])
    assert (seen.source, seen.digest, seen.node) == ("model", said["digest"], "model")
    assert seen.model == "ScriptedModel" and seen.trace_id  # the model's run id

    off = Recorder()
    quiet = LedgerMiddleware(off, tenant="acme", graph="g", version="1",  # type: ignore[arg-type]
                             effects={"issue_refund": Effect("refund", "payments",
                                                             business_id="invoice")},
                             observe_model=None)
    create_agent(ScriptedModel(), [issue_refund], middleware=[quiet]).invoke(start)
    assert off.intents[0].observations == ()


class NaNModel(ScriptedModel):
    """Answers a refund call whose arguments hold a NaN (Python's JSON parser accepts one)."""

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])
        call = {"name": "issue_refund", "args": {"invoice": "inv-3", "note": float("nan")},
                "id": "call_1"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("x", tool_calls=[call]))])


def test_a_model_answer_with_no_canonical_form_is_not_observed_and_the_run_goes_on() -> None:
    """Evidence never stops an effect: an answer the digest cannot encode (a NaN in a tool
    call's arguments) is left unobserved instead of failing the model call."""
    recorder = Recorder()
    ledger = LedgerMiddleware(recorder, tenant="acme", graph="g", version="1",  # type: ignore[arg-type]
                              effects={"issue_refund": Effect(
                                  "refund", "payments", business_id="invoice",
                                  material=lambda a: {"invoice": a["invoice"]})})
    create_agent(NaNModel(), [issue_refund], middleware=[ledger]).invoke(
        {"messages": [HumanMessage("refund inv-3")]})
    (intent,) = recorder.intents
    assert intent.observations == ()


def test_an_observed_node_whose_result_has_no_canonical_form_still_runs() -> None:
    """A price feed answering NaN: the node's update goes through unobserved (evidence never
    fails the step), as the middleware does for a model's answer."""
    @observed(source="prices")
    def price(state: S) -> dict[str, Any]:
        return {"price": float("nan")}

    graph = StateGraph(S)
    graph.add_node("price", price)
    graph.add_edge(START, "price")
    graph.add_edge("price", END)
    values = graph.compile().invoke({})
    assert values["price"] != values["price"]  # NaN, passed through
    assert "prices" not in (values.get("ledger_observations") or {})
