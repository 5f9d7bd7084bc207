"""Replays planned without a broker: real refund-agent graphs on a real SqliteSaver, the
ledger behind its interface (key states the decision core itself updates), as in
tests/upgrade/test_upgrade_check.py, whose threads these are: ``waiting`` (at its
approval), ``pending`` (killed after its refund intent was recorded) and ``done``."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from ledger_stream.replay import Kind
from ledger_stream.replay.report import as_json, as_table
from ledger_stream.replay.run import plan_thread
from tests.upgrade.graphs import CARD, card_in_amount, chain, saver, step
from tests.upgrade.support import (
    POLICY,
    MemoryLedger,
    approval_for,
    graph,
    write_threads,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def world(tmp_path: Path, client):  # noqa: F811 - the fixture imported above
    saver = SqliteSaver(sqlite3.connect(tmp_path / "agent.sqlite", check_same_thread=False))
    return saver, write_threads(saver, client)


def plan(world, client, thread, **kw):  # noqa: F811
    saver, ledger = world
    return plan_thread(graph(client, "refund"), saver, ledger, POLICY, thread,
                       at_ms=lambda: int(time.time() * 1000), **kw)


def found(plans, node: str) -> list[list[tuple[Kind, str]]]:
    """The findings of the checkpoints whose replay starts with ``node``, newest first."""
    return [[(f.kind, f.key or f.node) for f in p.findings] for p in plans
            if p.next == (node,)]


def rows(saver: SqliteSaver) -> tuple[int, int]:
    return (saver.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0],
            saver.conn.execute("SELECT count(*) FROM writes").fetchone()[0])


def test_a_paid_thread_is_safe_from_every_checkpoint(world, client):  # noqa: F811
    before, read = rows(world[0]), len(world[1].reads)
    plans = plan(world, client, "done", resume=approval_for)
    assert [p.verdict for p in plans] == [Kind.SAFE] * len(plans) and len(plans) >= 4
    assert found(plans, "tools") == [[(Kind.SAFE, "acme/refund/inv-done")]]
    assert rows(world[0]) == before  # the dry run wrote to its copy only
    # Each key's state is read once for the whole plan, not once per checkpoint.
    assert world[1].reads[read:] == ["acme/refund/inv-done"]


def test_a_fork_with_another_amount_is_rejected(world, client):  # noqa: F811
    saver, _ledger = world
    v1 = graph(client, "refund", saver)
    config = {"configurable": {"thread_id": "done"}}
    before = next(s for s in v1.get_state_history(config) if s.next == ("tools",))
    call = before.values["messages"][-1]
    edited = AIMessage(content="", id=call.id, tool_calls=[
        {**call.tool_calls[0], "args": {**call.tool_calls[0]["args"], "amount": 999.0}}])
    v1.update_state(before.config, {"messages": [edited]}, as_node="approval")
    plans = plan(world, client, "done")
    assert plans[0].source == "update" and plans[0].verdict is Kind.REJECTED
    assert found(plans, "tools") == [[(Kind.REJECTED, "acme/refund/inv-done")],
                                     [(Kind.SAFE, "acme/refund/inv-done")]]


def test_a_thread_killed_after_its_intent_and_one_never_approved(world, client):  # noqa: F811
    assert found(plan(world, client, "pending"), "tools") == [
        [(Kind.SAFE, "acme/refund/inv-pending")]]  # the ledger holds the intent: reserved
    waiting = plan(world, client, "waiting")
    assert [p.verdict for p in waiting] == [Kind.WAITING] * len(waiting)
    resumed = plan(world, client, "waiting", resume=approval_for, limit=1)
    assert len(resumed) == 1 and found(resumed, "approval") == [
        [(Kind.NEW_EFFECT, "acme/refund/inv-waiting")]]


def test_an_unknown_thread_is_an_error(world, client):  # noqa: F811
    with pytest.raises(LookupError, match="no checkpoint"):
        plan(world, client, "nobody")


def test_states_read_once(client):  # noqa: F811
    from ledger_stream.replay.run import StatesRead

    ledger = MemoryLedger()
    states = StatesRead(ledger)
    states.key_state("k")
    states.key_state("k")
    assert ledger.reads == ["k"]


def test_the_graphs_exception_is_reported_without_its_message(tmp_path):
    sv = saver(tmp_path / "a.sqlite")
    chain(("a", step("a")), ("b", step("b")), saver=sv).invoke(
        {"log": []}, {"configurable": {"thread_id": "t"}})
    plans = plan_thread(chain(("a", step("a")), ("b", card_in_amount)), sv, MemoryLedger(),
                        POLICY, "t", at_ms=lambda: int(time.time() * 1000))
    errors = [f.detail for p in plans for f in p.findings if f.kind is Kind.ERROR]
    assert errors and all(e.startswith("ValidationError [message not shown: ")
                          for e in errors)
    printed = as_table("t", plans) + as_json("t", plans)
    assert CARD[:4] not in printed and "input_value" not in printed
