"""A thread's checkpoints, read from its checkpointer and never written: the root graph's
history (newest first), and a copy of the thread as it stood at one checkpoint, in an
in-memory checkpointer, for a replay that must not touch the original.

The copy holds every checkpoint (of every namespace) up to the one replayed, with its
parents and pending writes, so LangGraph replays it as it would the original, and the
replay's intents name the checkpoint they re-run (langgraph/origin.py walks that
ancestry). Checkpoint ids are time-ordered (uuid6): "up to" compares them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

from ledger_stream.upgrade.threads import namespaces


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
