"""The upgrade check against what a hostile review fed it: joins, subgraphs, a replay or a
lost checkpoint behind the pending work, a key asked twice or by two parallel tasks, static
breakpoints, async nodes, answers that are not given, a ledger that lags, a held version.
Each case's expectation is what the new graph's real resume does (the comments say)."""

from __future__ import annotations

import contextlib
import pickle
import subprocess
import sys
import time
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt

from ledger_stream.domain import events as ev
from ledger_stream.sdk.dry_run import dry_run
from ledger_stream.upgrade import Kind, check_threads
from ledger_stream.upgrade.check import LedgerBehind
from ledger_stream.upgrade.report import as_json, as_table
from tests.upgrade import graphs
from tests.upgrade.graphs import CARD, S, card_in_amount, chain, effect, saver, step
from tests.upgrade.support import POLICY, Killed, MemoryLedger, Recording

pytestmark = pytest.mark.timeout(60)
CONFIG = {"configurable": {"thread_id": "t1"}}


class KillOn:
    """Record every intent; die right after recording the one for ``key``."""

    def __init__(self, ledger: MemoryLedger, key: str) -> None:
        self.ledger, self.key = ledger, key

    def answer(self, intent: ev.Intent) -> ev.Receipt:
        receipt = self.ledger.record(intent)
        if intent.key == self.key:
            raise Killed
        return receipt


def run_killed(graph: Any, ledger: MemoryLedger, key: str, given: Any = None,
               config: dict[str, Any] = CONFIG) -> None:
    with dry_run(KillOn(ledger, key)), contextlib.suppress(Killed):
        graph.invoke({"log": []} if given is None else given, config, durability="sync")


def kinds(graph: Any, sv: Any, ledger: MemoryLedger, **kw: Any) -> dict[Kind, list[str]]:
    (verdict,) = check_threads(graph, sv, ledger, POLICY, **kw)
    out: dict[Kind, list[str]] = {}
    for f in verdict.findings:
        out.setdefault(f.kind, []).append(f.key or f.node)
    return out


def join_graph(target: str, sv: Any = None) -> Any:
    g = StateGraph(S)
    g.add_node("a", step("a"))
    g.add_node("b", step("b"))
    g.add_node(target, effect("acme/mail/m-1", {"to": "x"}, target))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], target)
    g.add_edge(target, END)
    return g.compile(checkpointer=sv)


def test_a_renamed_join_target_is_a_dropped_task(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    run_killed(join_graph("c", sv), ledger, "acme/mail/m-1")
    # The real v2 resume returns without running c2: the mail's step is lost.
    assert kinds(join_graph("c2"), sv, ledger) == {Kind.DROPPED_TASK: ["c"],
                                                   Kind.ORPHAN: ["acme/mail/m-1"]}
    assert kinds(join_graph("c"), sv, ledger) == {Kind.SAFE: ["acme/mail/m-1"]}


def sub_graph(inner: str, first_args: dict, sv: Any = None) -> Any:
    sub = chain(("s1", effect("acme/mail/k1", first_args, "s1")),
                (inner, effect("acme/mail/k2", {"to": "y"}, inner)))
    return chain(("sub", sub), saver=sv)


def test_a_pending_step_inside_a_subgraph_is_checked_against_the_new_subgraph(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    run_killed(sub_graph("s2", {"to": "x"}, sv), ledger, "acme/mail/k2")
    # Renamed inside the subgraph: the real resume runs nothing more (k2's step dropped).
    assert kinds(sub_graph("s2b", {"to": "x"}), sv, ledger) == {
        Kind.DROPPED_TASK: ["sub/s2"], Kind.ORPHAN: ["acme/mail/k2"]}
    # s1 finished in the subgraph's checkpoint: changing its arguments changes nothing.
    assert kinds(sub_graph("s2", {"to": "changed"}), sv, ledger) == {
        Kind.SAFE: ["acme/mail/k2"]}


def keyed(fmt: str, sv: Any = None) -> Any:
    def mail(state: S, config: RunnableConfig) -> dict[str, Any]:
        return graphs.ask(fmt.format(n=state.get("n", "1")), {"to": "x"}, "t", config)

    return chain(("a", step("a")), ("b", step("b")), ("t", mail), saver=sv)


def test_a_replay_run_killed_after_its_intent_is_checked(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    v1 = keyed("acme/mail/m-{n}", sv)
    with dry_run(Recording(MemoryLedger(), kill=False)):
        v1.invoke({"n": "1", "log": []}, CONFIG, durability="sync")
    before_a = next(h for h in v1.get_state_history(CONFIG) if h.next == ("a",))
    run_killed(v1, ledger, "acme/mail/m-1", given=None, config=before_a.config)
    assert ledger.intents[0].origin is ev.Origin.REPLAY
    # v2 derives the key differently: the resumed replay would mail a second time.
    assert kinds(keyed("acme/mail/v2-{n}"), sv, ledger) == {
        Kind.NEW_EFFECT: ["acme/mail/v2-1"], Kind.ORPHAN: ["acme/mail/m-1"]}


@pytest.mark.parametrize("durability", ["async", "exit"])
def test_an_intent_whose_checkpoint_was_never_saved_is_checked(tmp_path, durability):
    path = tmp_path / "a.sqlite"
    graphs.wait_then_mail("acme/mail/m-1", saver(path)).invoke({"log": []}, CONFIG)
    child = subprocess.run([sys.executable, "-m", "tests.upgrade.graphs", str(path),
                            durability], capture_output=True, text=True, timeout=60)
    assert child.returncode == 9, child.stderr
    with open(f"{path}.intent", "rb") as saved:
        intent = pickle.load(saved)
    ledger = MemoryLedger()
    ledger.record(intent)
    sv = saver(path)
    from ledger_stream.upgrade.threads import has_checkpoint

    assert not has_checkpoint(sv, "t1", intent.workflow.checkpoint_id)  # lost with the kill
    found = kinds(graphs.wait_then_mail("acme/mail/v2-1"), sv, ledger,
                  resume=lambda _t, _v: "yes")
    assert found == {Kind.NEW_EFFECT: ["acme/mail/v2-1"], Kind.ORPHAN: ["acme/mail/m-1"]}


def test_a_key_asked_again_later_with_other_arguments_is_a_conflict(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    run_killed(chain(("t", effect("acme/mail/m-1", {"to": "x"}, "t")), saver=sv),
               ledger, "acme/mail/m-1")
    v2 = chain(("t", effect("acme/mail/m-1", {"to": "x"}, "t")),
               ("u", effect("acme/mail/m-1", {"to": "other"}, "u")))
    assert kinds(v2, sv, ledger) == {Kind.CONFLICT: ["acme/mail/m-1"]}


class SlowLedger(MemoryLedger):
    def key_state(self, key: str) -> Any:
        time.sleep(0.2)  # a real read takes a while: long enough for the tasks to race
        return super().key_state(key)


def test_two_parallel_tasks_asking_one_key_are_decided_one_at_a_time(tmp_path):
    def fan(_state: S) -> list[Send]:
        return [Send("part", {"n": to}) for to in ("x", "y")]

    def part(state: S, config: RunnableConfig) -> dict[str, Any]:
        return graphs.ask("acme/mail/m-1", {"to": state["n"]}, "part", config)

    g = StateGraph(S)
    g.add_node("start", step("start"))
    g.add_node("part", part)
    g.add_edge(START, "start")
    g.add_conditional_edges("start", fan, ["part"])
    g.add_edge("part", END)
    sv, ledger = saver(tmp_path / "a.sqlite"), SlowLedger()
    with dry_run(Recording(MemoryLedger(), kill=False)):  # up to the fan-out only
        g.compile(checkpointer=sv, interrupt_before=["part"]).invoke({"log": []}, CONFIG)
    assert kinds(g.compile(), sv, ledger) == {Kind.CONFLICT: ["acme/mail/m-1"]}


def confirm_graph(sv: Any = None) -> Any:
    def mail_then_confirm(_state: S, config: RunnableConfig) -> dict[str, Any]:
        update = graphs.ask("acme/mail/m-1", {"to": "x"}, "n", config)
        interrupt("confirm?")
        return update

    return chain(("n", mail_then_confirm), saver=sv)


def test_an_effect_before_an_unanswered_interrupt_is_checked_not_orphaned(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    with dry_run(Recording(ledger, kill=False)):
        confirm_graph(sv).invoke({"log": []}, CONFIG, durability="sync")
    # Resuming runs the node again up to its interrupt: the same intent, then waiting.
    assert kinds(confirm_graph(), sv, ledger) == {Kind.SAFE: ["acme/mail/m-1"],
                                                  Kind.WAITING: ["n"]}
    assert kinds(confirm_graph(), sv, ledger, resume=lambda _t, _v: None) == {
        Kind.SAFE: ["acme/mail/m-1"], Kind.WAITING: ["n"]}  # None is no answer
    assert kinds(confirm_graph(), sv, ledger, resume=lambda _t, _v: "yes") == {
        Kind.SAFE: ["acme/mail/m-1"]}


def test_a_static_breakpoint_stops_the_check_unless_it_may_go_on(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    v1 = chain(("x", step("x")), ("t", effect("acme/mail/m-1", {"to": "a"}, "t")),
               saver=sv, interrupt_before=["t"])
    with dry_run(Recording(ledger, kill=False)):
        v1.invoke({"log": []}, CONFIG)
    ledger.record(graphs.CLIENT.intent("acme/mail/m-1", "mail", "smtp", {"to": "a"},
                                       workflow=ev.Workflow("g", "1.0", "t0", "t")))
    v2 = chain(("x", step("x")), ("t", effect("acme/mail/m-1", {"to": "b"}, "t")),
               interrupt_before=["t"])
    assert kinds(v2, sv, ledger) == {Kind.WAITING: ["t"]}
    assert kinds(v2, sv, ledger, resume=lambda _t, _v: "go") == {
        Kind.CONFLICT: ["acme/mail/m-1"]}


def test_an_async_node_runs_in_the_check(tmp_path):
    async def mail(_state: S, config: RunnableConfig) -> dict[str, Any]:
        return graphs.ask("acme/mail/m-1", {"to": "x"}, "t", config)

    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    v1 = chain(("x", step("x")), ("t", mail), saver=sv, interrupt_before=["t"])
    v1.invoke({"log": []}, CONFIG)
    assert kinds(chain(("x", step("x")), ("t", mail), interrupt_before=["t"]), sv, ledger,
                 resume=lambda _t, _v: "go") == {Kind.NEW_EFFECT: ["acme/mail/m-1"]}


def test_a_version_the_ledger_would_hold_is_unsafe(tmp_path):
    from examples.refund_agent.variants import VARIANTS, Effects
    from tests.upgrade.support import write_threads

    sv = saver(tmp_path / "agent.sqlite")
    ledger = write_threads(sv, graphs.CLIENT)
    as_2 = VARIANTS["refund"].build(Effects(graphs.CLIENT, None, "2.0"), None)
    pending = next(v for v in check_threads(as_2, sv, ledger, POLICY)
                   if v.thread_id == "pending")
    # The real resume leaves the thread holding "held: version", which nothing settles.
    assert [f.kind for f in pending.findings] == [Kind.HELD] and pending.unsafe


def test_a_lagging_processor_stops_the_check(tmp_path):
    class Lagging(MemoryLedger):
        def undecided(self, upto=None) -> int:
            return 3

    sv = saver(tmp_path / "a.sqlite")
    chain(("x", step("x")), saver=sv).invoke({"log": []}, CONFIG)
    with pytest.raises(LedgerBehind, match="3 intents"):
        check_threads(chain(("x", step("x"))), sv, Lagging(), POLICY, lag_wait_s=0.2)


def test_the_new_codes_exception_is_reported_without_its_message(tmp_path):
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    run_killed(chain(("a", step("a")), ("t", effect("acme/mail/m-1", {"to": "x"}, "t")),
                     saver=sv), ledger, "acme/mail/m-1")
    verdicts = check_threads(chain(("a", step("a")), ("t", card_in_amount)), sv, ledger,
                             POLICY)
    (error,) = [f.detail for f in verdicts[0].findings if f.kind is Kind.ERROR]
    assert error.startswith("ValidationError [message not shown: ")
    printed = as_table(verdicts) + as_json(verdicts)
    assert CARD[:4] not in printed and "input_value" not in printed
