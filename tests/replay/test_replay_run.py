"""Replays planned without a broker: real refund-agent graphs on a real SqliteSaver, the
ledger behind its interface (key states the decision core itself updates), as in
tests/upgrade/test_upgrade_check.py, whose threads these are: ``waiting`` (at its
approval), ``pending`` (killed after its refund intent was recorded) and ``done``."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from ledger_stream.domain import events as ev
from ledger_stream.replay import Kind, exit_status
from ledger_stream.replay.report import as_json, as_table
from ledger_stream.replay.run import plan_thread
from ledger_stream.sdk.dry_run import dry_run
from tests.upgrade.graphs import (
    CARD,
    ask,
    card_in_amount,
    chain,
    saver,
    step,
    wait_then_mail,
)
from tests.upgrade.support import (
    POLICY,
    MemoryLedger,
    Recording,
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


def mail_graph(picks: list[str], sv=None):
    """pick (an id, as a model would format it: each run takes the next of ``picks``) ->
    pay (mails under a key made of that id)."""
    ids = iter(picks)

    def pay(state, config):
        return ask(f"acme/mail/{state['n']}", {"to": state["n"]}, "pay", config)

    return chain(("pick", lambda _s: {"n": next(ids), "log": ["pick"]}), ("pay", pay),
                 saver=sv)


def test_a_key_the_thread_paid_that_a_replay_no_longer_asks_is_an_orphan(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    with dry_run(Recording(ledger, kill=False)):
        mail_graph(["id-1"], sv).invoke({"log": []}, {"configurable": {"thread_id": "t"}},
                                        durability="sync")
    assert [i.key for i in ledger.intents] == ["acme/mail/id-1"]  # what the thread paid
    # A replay re-runs pick, which formats the id otherwise: a second mail, under id-2.
    plans = plan_thread(mail_graph(["ID-2"] * 9), sv, ledger, POLICY, "t",
                        at_ms=lambda: int(time.time() * 1000))
    assert found(plans, "pick") == found(plans, "__start__") == [
        [(Kind.NEW_EFFECT, "acme/mail/ID-2"), (Kind.ORPHAN, "acme/mail/id-1")]]
    assert [p.verdict for p in plans if p.next in (("pick",), ("__start__",))] == [
        Kind.ORPHAN, Kind.ORPHAN]
    # From pay's checkpoint the id is the one saved: the original receipt; after it, nothing.
    assert found(plans, "pay") == [[(Kind.SAFE, "acme/mail/id-1")]]
    assert [p.verdict for p in plans[:2]] == [Kind.SAFE, Kind.SAFE]
    assert exit_status(plans) == 1
    table, document = as_table("t", plans), json.loads(as_json("t", plans))
    assert "\torphan\torphan\tacme/mail/id-1\tthe thread recorded this key" in table
    assert [f["key"] for c in document["checkpoints"] for f in c["findings"]
            if f["kind"] == "orphan"] == ["acme/mail/id-1"] * 2


def test_a_key_of_another_branch_is_no_orphan(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    config = {"configurable": {"thread_id": "t"}}
    with dry_run(Recording(ledger, kill=False)):
        first = mail_graph(["id-1", "id-2"], sv)
        first.invoke({"log": []}, config, durability="sync")
        at_pick = next(s for s in first.get_state_history(config) if s.next == ("pick",))
        first.invoke(None, at_pick.config, durability="sync")  # a replay: mails id-2
    assert [(i.key, i.origin) for i in ledger.intents] == [
        ("acme/mail/id-1", ev.Origin.FRESH), ("acme/mail/id-2", ev.Origin.REPLAY)]
    plans = plan_thread(mail_graph(["id-3"] * 9), sv, ledger, POLICY, "t",
                        at_ms=lambda: int(time.time() * 1000))
    # pay's checkpoints, newest first: the replay's (id-2) and the original's (id-1).
    assert found(plans, "pay") == [[(Kind.SAFE, "acme/mail/id-2")],
                                   [(Kind.SAFE, "acme/mail/id-1")]]
    # pick's: the replay's branch start re-runs only its own mail; the original checkpoint
    # (an ancestor of both branches) re-runs both runs' mails.
    assert found(plans, "pick") == [
        [(Kind.NEW_EFFECT, "acme/mail/id-3"), (Kind.ORPHAN, "acme/mail/id-2")],
        [(Kind.NEW_EFFECT, "acme/mail/id-3"), (Kind.ORPHAN, "acme/mail/id-1"),
         (Kind.ORPHAN, "acme/mail/id-2")]]


def test_a_key_after_an_interrupt_the_replay_stopped_at_is_not_reached(tmp_path):
    """The approval pattern: ask (an interrupt) -> pre -> t (the mail). Replayed without
    an answer, the replay stops at ask: the thread's mail is not reached, not an orphan."""
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    config = {"configurable": {"thread_id": "t"}}
    with dry_run(Recording(ledger, kill=False)):
        wait_then_mail("acme/mail/m-1", sv).invoke({"log": []}, config, durability="sync")
        wait_then_mail("acme/mail/m-1", sv).invoke(Command(resume="yes"), config,
                                                   durability="sync")
    assert [i.key for i in ledger.intents] == ["acme/mail/m-1"]
    plans = plan_thread(wait_then_mail("acme/mail/m-1"), sv, ledger, POLICY, "t",
                        at_ms=lambda: int(time.time() * 1000))
    assert found(plans, "ask") == [[(Kind.WAITING, "acme/mail/m-1"), (Kind.WAITING, "ask")]]
    assert Kind.ORPHAN not in {p.verdict for p in plans}
