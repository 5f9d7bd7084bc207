"""A thread's checkpoints, read from its checkpointer and never written: the root graph's
history (newest first), and a copy of the thread as it stood at one checkpoint, in an
in-memory checkpointer, for a replay that must not touch the original.

The copy holds every checkpoint (of every namespace) up to the one replayed, with its
parents and pending writes, so LangGraph replays it as it would the original, and the
replay's intents name the checkpoint they re-run (langgraph/origin.py walks that
ancestry). Checkpoint ids are time-ordered (uuid6): "up to" compares them.

``Lineage`` says which of the thread's recorded intents a replay from a checkpoint re-runs:
those of the steps that ran from it or from a checkpoint that descends from it, as an
intent's ``workflow.checkpoint_id`` names them (langgraph/origin.py: a fresh or resumed
step's own checkpoint; for every step of a replay or fork run the checkpoint replayed or
the fork, so such an intent is also taken when the checkpoint planned is on that run's
branch (past the fork, or past the branch's first checkpoint, the child of the checkpoint
replayed: source ``fork`` for a replay, ``update`` for a fork origin.py could not tell
apart and named as a replay of the checkpoint forked) and was written before the
intent); and those whose checkpoint was never saved (durability ``async`` or ``exit``
and a crash) when it is newer. Where it cannot tell (two runs from one checkpoint), it
takes the intent: a false ``orphan``, never a missed one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

from ledger_stream.domain import events as ev
from ledger_stream.upgrade.check import REPLAYED
from ledger_stream.upgrade.threads import _ts_ms, namespaces


def root_history(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[CheckpointTuple]:
    """The thread's root-graph checkpoints, newest first ([] when it has none)."""
    return _in_namespace(saver, thread_id, "")


def _in_namespace(saver: BaseCheckpointSaver[Any], thread_id: str,
                  ns: str) -> list[CheckpointTuple]:
    # SqliteSaver.list does not filter on an empty namespace: filter here.
    found = saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}})
    out = [c for c in found if c.config["configurable"].get("checkpoint_ns", "") == ns]
    return sorted(out, key=lambda c: str(c.checkpoint["id"]), reverse=True)


def copy_until(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_id: str,
               memory: InMemorySaver) -> dict[str, Any]:
    """Copy the thread's checkpoints up to ``checkpoint_id`` into ``memory``; returns the
    config that addresses that checkpoint there (a replay from it)."""
    for ns in namespaces(saver, thread_id):
        kept = [c for c in _in_namespace(saver, thread_id, ns)
                if str(c.checkpoint["id"]) <= checkpoint_id]
        for found in reversed(kept):  # oldest first: each parent before its child
            _put(memory, thread_id, ns, found)
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                             "checkpoint_id": checkpoint_id}}


def _put(memory: InMemorySaver, thread_id: str, ns: str, found: CheckpointTuple) -> None:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    parent = ((found.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
    if parent:
        conf["checkpoint_id"] = parent
    saved = memory.put({"configurable": conf}, found.checkpoint, found.metadata or {},
                       dict(found.checkpoint.get("channel_versions", {})))
    by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task, channel, value in found.pending_writes or []:
        by_task[task].append((channel, value))
    for task, writes in by_task.items():
        memory.put_writes(saved, writes, task)


class Lineage:
    """The ancestry of a thread's root checkpoints (``history``: all of them)."""

    def __init__(self, history: Sequence[CheckpointTuple]) -> None:
        self._parent = {str(c.checkpoint["id"]): _parent_id(c) for c in history}
        self._ts_ms = {str(c.checkpoint["id"]): _ts_ms(c) for c in history}
        self._source = {str(c.checkpoint["id"]): str((c.metadata or {}).get("source", ""))
                        for c in history}

    def _line(self, checkpoint_id: str) -> list[str]:
        """The checkpoint and its ancestors, the checkpoint first."""
        line: list[str] = []
        while checkpoint_id and checkpoint_id not in line:
            line.append(checkpoint_id)
            checkpoint_id = self._parent.get(checkpoint_id, "")
        return line

    def _on_branch(self, intent: ev.Intent, line: list[str]) -> bool:
        """Whether the replay or fork run that made ``intent`` wrote the checkpoint whose
        ``line`` this is (made after it, past the fork, or past a replay's branch start)."""
        at = intent.workflow.checkpoint_id
        if at not in line[1:] or intent.at_ms < self._ts_ms[line[0]]:
            return False
        if intent.origin is ev.Origin.FORK:
            return True
        # The child of the checkpoint replayed: "fork" for a replay's branch, "update"
        # for an update_state fork origin.py could not tell apart (it names the checkpoint
        # the fork was made from, as for a replay).
        start = line[line.index(at) - 1]
        return self._source.get(start) in ("fork", "update")

    def rerun(self, checkpoint_id: str, intents: Iterable[ev.Intent]) -> list[ev.Intent]:
        """The ``intents`` made by steps that a replay from ``checkpoint_id`` runs again."""
        out = []
        line = self._line(checkpoint_id)
        for intent in intents:
            at = intent.workflow.checkpoint_id
            if at not in self._parent:
                # Never saved: newer ids are later. "" (made without a checkpointer: no
                # step to place it in) is older than every id.
                again = at >= checkpoint_id
            else:
                again = checkpoint_id in self._line(at) or (
                    intent.origin in REPLAYED and self._on_branch(intent, line))
            if again:
                out.append(intent)
        return out


def _parent_id(found: CheckpointTuple) -> str:
    return str(((found.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
               or "")
