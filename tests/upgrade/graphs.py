"""Small graphs for the upgrade check's hostile cases: each node that has an effect asks
the ledger through a real LedgerClient (the dry run or the test's recorder answers)."""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from ledger_stream import LedgerClient
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.langgraph.origin import step_origin

CLIENT = LedgerClient(Settings(kafka_bootstrap="127.0.0.1:9"))  # never reached: dry runs


def merge(left: dict | None, right: dict | None) -> dict:
    return {**(left or {}), **(right or {})}


class S(TypedDict, total=False):
    log: Annotated[list, operator.add]
    n: str
    ledger_receipts: Annotated[dict, merge]


def saver(path: Any) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


def ask(key: str, args: dict, node: str, config: RunnableConfig) -> dict[str, Any]:
    """Submit the intent as ledger_tool would; the state update recording its receipt."""
    where = step_origin(config)
    thread = str(config["configurable"]["thread_id"])
    intent = CLIENT.intent(key, "mail", "smtp", args, workflow=ev.Workflow(
        "g", "1.0", thread, node, where.checkpoint_id), origin=where.origin)
    receipt = CLIENT.submit(intent, 1, raise_errors=False)
    return {"log": [f"{node}:{receipt.status.value}"],
            "ledger_receipts": {key: receipt.status.value}}


def effect(key: str, args: dict, node: str) -> Callable[[S, RunnableConfig], dict[str, Any]]:
    return lambda _state, config: ask(key, args, node, config)


def step(name: str) -> Callable[[S], dict[str, Any]]:
    return lambda _state: {"log": [name]}


CARD = "4111-1111-1111-1111"


def card_in_amount(_state: S) -> dict[str, Any]:
    """A node whose tool arguments fail validation: the model put a card number in an
    amount (pydantic's message quotes the input value)."""
    from pydantic import BaseModel

    class Refund(BaseModel):
        amount: int

    Refund.model_validate({"amount": f"{CARD} exp 12/29"})
    return {}


def chain(*nodes: tuple[str, Any], saver: Any = None, **compile_kw: Any) -> Any:
    """START -> nodes in order -> END."""
    g = StateGraph(S)
    for name, fn in nodes:
        g.add_node(name, fn)
    names = [START, *(name for name, _ in nodes), END]
    for a, b in zip(names, names[1:], strict=False):
        g.add_edge(a, b)
    return g.compile(checkpointer=saver, **compile_kw)


def wait_then_mail(key: str, saver: Any = None) -> Any:
    """ask (an interrupt) -> pre -> t (the mail): the durability case."""
    from langgraph.types import interrupt

    def question(_state: S) -> dict[str, Any]:
        return {"log": [f"ok:{interrupt('approve?')}"]}

    return chain(("ask", question), ("pre", step("pre")),
                 ("t", effect(key, {"to": "x"}, "t")), saver=saver)


if __name__ == "__main__":  # the worker of the durability test: dies right after its intent
    import os
    import pickle
    import sys

    from langgraph.types import Command

    from ledger_stream.sdk.dry_run import dry_run

    path, durability = sys.argv[1], sys.argv[2]

    class Die:
        def answer(self, intent: ev.Intent) -> ev.Receipt:
            with open(path + ".intent", "wb") as out:
                pickle.dump(intent, out)
            os._exit(9)  # as SIGKILL: nothing flushed, no background save finished

    store = saver(path)
    if durability == "async":  # a slow store: the background save never beats the kill
        import time

        put = store.put

        def slow_put(*args: Any, **kwargs: Any) -> Any:
            time.sleep(5)
            return put(*args, **kwargs)

        store.put = slow_put  # type: ignore[method-assign]
    with dry_run(Die()):
        wait_then_mail("acme/mail/m-1", store).invoke(
            Command(resume="yes"), {"configurable": {"thread_id": "t1"}},
            durability=durability)
