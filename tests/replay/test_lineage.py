"""Which recorded intents a replay from a checkpoint re-runs (history.py's ``Lineage``), on
real LangGraph histories (a SqliteSaver): a fresh run, then a replay or a fork of it. The
intents are those the runs made (origin.py named their checkpoints); where a case needs
an intent LangGraph does not make on demand (a checkpoint never saved, a branch origin.py
could not tell), it is one of those with that one field changed."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base.id import uuid6

from ledger_stream.domain import events as ev
from ledger_stream.replay.history import Lineage, root_history
from ledger_stream.sdk.dry_run import dry_run
from tests.upgrade.graphs import ask, chain, saver, step
from tests.upgrade.support import MemoryLedger, Recording

CONFIG = {"configurable": {"thread_id": "t"}}


def mail_graph(sv: Any) -> Any:
    """pick (the id: the state's, else id-1) -> mid -> pay (mails under that id, then
    works on: the checkpoint after it is written in a later millisecond)."""
    def pay(state, config):
        asked = ask(f"acme/mail/{state['n']}", {"to": state["n"]}, "pay", config)
        time.sleep(0.005)
        return asked

    return chain(("pick", lambda s: {"n": s.get("n") or "id-1", "log": ["pick"]}),
                 ("mid", step("mid")), ("pay", pay), saver=sv)


def thread(tmp_path: Path, then: str = "") -> tuple[Lineage, list[Row], list[ev.Intent]]:
    """A fresh run; ``then`` "replay" (from pick's checkpoint) or "fork" (update_state
    after pick, n = id-2, run on). The lineage, the checkpoints (oldest first) and the
    intents recorded."""
    sv, ledger = saver(tmp_path / "a.sqlite"), MemoryLedger()
    graph = mail_graph(sv)
    with dry_run(Recording(ledger, kill=False)):
        graph.invoke({"log": []}, CONFIG, durability="sync")
        history = list(graph.get_state_history(CONFIG))
        if then == "replay":
            at_pick = next(s for s in history if s.next == ("pick",))
            graph.invoke(None, at_pick.config, durability="sync")
        elif then == "fork":
            at_mid = next(s for s in history if s.next == ("mid",))
            fork = graph.update_state(at_mid.config, {"n": "id-2"}, as_node="pick")
            graph.invoke(None, fork, durability="sync")
    rows = [Row(str(s.config["configurable"]["checkpoint_id"]), s.next, s.values.get("n"),
                str(s.metadata.get("source")), s.config["configurable"]["checkpoint_id"]
                > str(history[0].config["configurable"]["checkpoint_id"]))
            for s in graph.get_state_history(CONFIG)]
    return Lineage(root_history(sv, "t")), rows[::-1], ledger.intents


@dataclasses.dataclass(frozen=True)
class Row:
    id: str
    next: tuple[str, ...]
    n: str | None
    source: str
    branch: bool  # written by the second run (the replay or the fork)


def one(rows: list[Row], nxt: tuple[str, ...], branch: bool, source: str = "loop") -> str:
    (found,) = [r.id for r in rows if (r.next, r.branch, r.source) == (nxt, branch, source)]
    return found


def moved(intent: ev.Intent, **changes: Any) -> ev.Intent:
    """The intent with its workflow's checkpoint and/or its origin changed."""
    origin = changes.pop("origin", intent.origin)
    workflow = dataclasses.replace(intent.workflow, **changes)
    return dataclasses.replace(intent, workflow=workflow, origin=origin)


def test_an_unsaved_checkpoint_counts_for_every_older_one(tmp_path):
    before = str(uuid6())
    lineage, rows, (paid,) = thread(tmp_path)
    after = str(uuid6())  # a checkpoint that never was saved (durability exit, a crash)
    late, early, none = moved(paid, checkpoint_id=after), moved(paid, checkpoint_id=before), \
        moved(paid, checkpoint_id="")
    for checkpoint_id in (r.id for r in rows):
        assert lineage.rerun(checkpoint_id, [late, early, none]) == [late]


def test_a_replays_intent_is_not_rerun_from_its_branch_past_it(tmp_path):
    lineage, rows, intents = thread(tmp_path, "replay")
    assert [(i.key, i.origin) for i in intents] == [
        ("acme/mail/id-1", ev.Origin.FRESH), ("acme/mail/id-1", ev.Origin.REPLAY)]
    replayed = intents[1]
    assert replayed.workflow.checkpoint_id == one(rows, ("pick",), False)
    assert lineage.rerun(one(rows, ("pay",), True), [replayed]) == [replayed]  # before it
    assert lineage.rerun(one(rows, (), True), [replayed]) == []  # after it: no pay re-run


def test_a_fresh_intent_is_not_taken_for_a_replays_branch(tmp_path):
    lineage, rows, intents = thread(tmp_path, "replay")
    before_pay = one(rows, ("pay",), True)
    assert lineage.rerun(before_pay, intents[1:]) == intents[1:]
    # The same step, had a fresh run made it: not the replay's, not on its branch.
    assert lineage.rerun(before_pay, [moved(intents[1], origin=ev.Origin.FRESH)]) == []


def test_a_forks_intent_is_rerun_from_its_branch(tmp_path):
    lineage, rows, intents = thread(tmp_path, "fork")
    forked = intents[1]
    fork = one(rows, ("mid",), True, "update")
    assert (forked.origin, forked.workflow.checkpoint_id) == (ev.Origin.FORK, fork)
    before_pay = one(rows, ("pay",), True)
    assert lineage.rerun(before_pay, [forked]) == [forked]
    assert lineage.rerun(fork, [forked]) == [forked]



def test_a_fork_origin_could_not_tell_is_rerun_from_its_branch(tmp_path):
    """origin.py names a fork it cannot tell apart a ``replay`` of the checkpoint
    update_state forked (the fork's parent): the fork's first checkpoint has source
    ``update``, not ``fork``."""
    lineage, rows, intents = thread(tmp_path, "fork")
    fork = one(rows, ("mid",), True, "update")
    told = moved(intents[1], origin=ev.Origin.REPLAY, checkpoint_id=one(rows, ("mid",), False))
    assert lineage.rerun(one(rows, ("pay",), True), [told]) == [told]
    assert lineage.rerun(fork, [told]) == [told]
