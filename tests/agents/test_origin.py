"""Which kind of run asked (langgraph/origin.py), read from real LangGraph runs on real
checkpointers: a fresh run, a resume after a crash, a replay of a past checkpoint (time
travel) and a fork made with ``update_state``, each with the checkpoint it names. No ledger
here: the step records what ``step_origin`` says; the tools and the middleware pass it on
(tests/agents/test_refund_agent.py checks it reaches the ledger)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from ledger_stream.domain.events import Origin
from ledger_stream.langgraph.origin import StepOrigin, step_origin

pytestmark = pytest.mark.timeout(60)


class State(TypedDict):
    amount: int


class Recorder:
    """A graph prep → pay → notify; pay and notify record their origin; pay can crash."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.seen: list[tuple[str, StepOrigin]] = []
        self.crash_next = False
        graph = StateGraph(State)
        graph.add_node("prep", lambda state: {"amount": state["amount"]})
        graph.add_node("pay", self.pay)
        graph.add_node("notify", self.notify)
        graph.add_edge(START, "prep")
        graph.add_edge("prep", "pay")
        graph.add_edge("pay", "notify")
        graph.add_edge("notify", END)
        self.app = graph.compile(checkpointer=saver)

    def pay(self, state: State, config: RunnableConfig) -> dict[str, Any]:
        self.seen.append(("pay", step_origin(config)))
        if self.crash_next:
            self.crash_next = False
            raise RuntimeError("killed after the effect, before the checkpoint")
        return {"amount": state["amount"]}

    def notify(self, state: State, config: RunnableConfig) -> dict[str, Any]:
        self.seen.append(("notify", step_origin(config)))
        return {}

    def last(self, node: str) -> StepOrigin:
        return [origin for name, origin in self.seen if name == node][-1]

    def checkpoint_before(self, config: RunnableConfig, node: str) -> RunnableConfig:
        (found,) = [s for s in self.app.get_state_history(config) if s.next == (node,)][:1]
        return found.config


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    if request.param == "memory":
        yield InMemorySaver()
        return
    connection = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    try:
        yield SqliteSaver(connection)
    finally:
        connection.close()


def test_fresh_then_resumed_after_a_crash(saver: BaseCheckpointSaver[Any]) -> None:
    r = Recorder(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t-1"}}
    r.crash_next = True
    with pytest.raises(RuntimeError):
        r.app.invoke({"amount": 42}, config)
    first = r.last("pay")
    assert first.origin is Origin.FRESH and first.checkpoint_id
    r.app.invoke(None, config)  # the worker comes back: pay runs again from its top
    again = r.last("pay")
    assert again == StepOrigin(Origin.RESUME, first.checkpoint_id)
    assert r.last("notify").origin is Origin.FRESH  # a later step runs for the first time


def test_a_replay_names_the_checkpoint_it_reruns(saver: BaseCheckpointSaver[Any]) -> None:
    r = Recorder(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t-2"}}
    r.app.invoke({"amount": 42}, config)
    past = r.checkpoint_before(config, "pay")
    r.app.invoke(None, past)
    replayed = past["configurable"]["checkpoint_id"]
    assert r.last("pay") == StepOrigin(Origin.REPLAY, replayed)
    assert r.last("notify") == StepOrigin(Origin.REPLAY, replayed)  # the whole run replays


def test_a_fork_names_the_checkpoint_update_state_made(
        saver: BaseCheckpointSaver[Any]) -> None:
    r = Recorder(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t-3"}}
    r.app.invoke({"amount": 42}, config)
    past = r.checkpoint_before(config, "pay")
    fork = r.app.update_state(past, {"amount": 99})
    r.app.invoke(None, fork)
    forked = fork["configurable"]["checkpoint_id"]
    assert forked != past["configurable"]["checkpoint_id"]
    assert r.last("pay") == StepOrigin(Origin.FORK, forked)
    assert r.last("notify") == StepOrigin(Origin.FORK, forked)  # found walking back


def test_no_config_and_an_unreadable_branch_say_what_can_be_said() -> None:
    assert step_origin(None) == StepOrigin(Origin.FRESH, "")

    class Replayed:
        checkpoint_id = "cp-1"

    unreadable = {"configurable": {"__pregel_replay_state": Replayed(),
                                   "checkpoint_map": {"": "cp-2"}, "thread_id": "t"}}
    assert step_origin(unreadable) == StepOrigin(Origin.REPLAY, "cp-1")


def test_a_fork_after_a_replay_of_the_same_checkpoint_never_names_the_replays_branch(
        saver: BaseCheckpointSaver[Any]) -> None:
    r = Recorder(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t-4"}}
    r.app.invoke({"amount": 42}, config)
    past = r.checkpoint_before(config, "pay")
    r.app.invoke(None, past)  # a replay: LangGraph starts a branch from `past`
    replay_branch = {o.checkpoint_id for _, o in r.seen[-2:]}
    fork = r.app.update_state(past, {"amount": 99})
    r.app.invoke(None, fork, durability="async")
    forked, addressed = fork["configurable"]["checkpoint_id"], past["configurable"][
        "checkpoint_id"]
    assert r.last("pay") == StepOrigin(Origin.FORK, forked)
    assert r.last("notify") in (StepOrigin(Origin.FORK, forked),
                                StepOrigin(Origin.REPLAY, addressed))
    assert r.last("notify").checkpoint_id not in replay_branch - {addressed}
