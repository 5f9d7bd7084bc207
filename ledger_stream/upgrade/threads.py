"""The threads a checkpointer holds, as an upgrade sees them: which are in flight (a step
pending, or an ``interrupt()`` waiting), which nodes their pending steps would run, and a
copy of each thread's newest checkpoint for a dry run that never writes to the original.

Pending nodes are read from the checkpoint itself, not from any graph: LangGraph 1.x marks a
node triggered by a value in its ``branch:to:<node>`` channel, and a ``Send`` to a node is a
packet in ``__pregel_tasks`` (in the checkpoint or in the pending step's writes). A new graph
that lacks such a node drops the task without a word (falsification scenario 13), so the
names must come from the checkpoint the old graph wrote. Only the root graph's checkpoints
(namespace ``""``) are read: subgraph state travels with its parent's task.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

BRANCH = "branch:to:"
TASKS = "__pregel_tasks"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
RECEIPTS = "ledger_receipts"  # the state field ledger_tool and LedgerMiddleware write


@dataclass(frozen=True)
class ThreadAt:
    """A thread's newest root checkpoint."""

    thread_id: str
    checkpoint_id: str
    parent_id: str
    source: str  # the checkpoint's metadata source: input, loop, update, fork
    pending_nodes: tuple[str, ...]  # the nodes its next step would run, sorted
    waiting: bool  # an interrupt() is waiting for an answer
    # Keys whose receipts tasks of the pending step that finished already saved (their
    # ``ledger_receipts`` writes): resuming does not run those tasks again.
    acknowledged: frozenset[str]
    snapshot: CheckpointTuple

    @property
    def in_flight(self) -> bool:
        return bool(self.pending_nodes) or self.waiting

    @property
    def step_checkpoints(self) -> frozenset[str]:
        """The checkpoint ids intents of the pending step carry (langgraph/origin.py): the
        step's own, and for the first step of a replay branch the checkpoint replayed."""
        ids = {self.checkpoint_id}
        if self.source == "fork" and self.parent_id:
            ids.add(self.parent_id)
        return frozenset(ids)


def thread_ids(saver: BaseCheckpointSaver[Any]) -> list[str]:
    """Every thread with a root checkpoint, each once, sorted: a query of the saver's own
    table for the SQLite and PostgreSQL savers, a walk of every checkpoint otherwise."""
    conn = getattr(saver, "conn", None)
    query = "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = '' " \
            "ORDER BY thread_id"
    if isinstance(conn, sqlite3.Connection):
        return [str(row[0]) for row in conn.execute(query).fetchall()]
    if conn is not None and type(saver).__name__ == "PostgresSaver":
        with saver._cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(query)
            return [str(row["thread_id"]) for row in cur.fetchall()]
    seen: set[str] = set()
    for found in saver.list(None):
        conf = found.config["configurable"]
        if conf.get("checkpoint_ns", "") == "":
            seen.add(str(conf["thread_id"]))
    return sorted(seen)


def thread_at(saver: BaseCheckpointSaver[Any], thread_id: str) -> ThreadAt | None:
    """The thread's newest root checkpoint, or None when it has none."""
    found = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    if found is None:
        return None
    checkpoint = found.checkpoint
    writes = found.pending_writes or []
    nodes = {channel[len(BRANCH):] for channel in checkpoint.get("channel_values", {})
             if channel.startswith(BRANCH)}
    packets = list(checkpoint.get("channel_values", {}).get(TASKS) or [])
    packets += [value for _task, channel, value in writes if channel == TASKS]
    nodes |= {str(packet.node) for packet in packets if hasattr(packet, "node")}
    interrupted = {task for task, channel, _value in writes if channel == INTERRUPT}
    answered = {task for task, channel, _value in writes if channel == RESUME}
    acknowledged = {str(key) for _task, channel, value in writes
                    if channel == RECEIPTS and isinstance(value, dict) for key in value}
    parent = ((found.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
    return ThreadAt(thread_id, str(checkpoint["id"]), str(parent or ""),
                    str((found.metadata or {}).get("source", "")), tuple(sorted(nodes)),
                    bool(interrupted - answered), frozenset(acknowledged), found)


def copy_thread(thread: ThreadAt, memory: InMemorySaver) -> dict[str, Any]:
    """Put the thread's newest checkpoint and its pending writes into ``memory``; returns
    the config that addresses the thread there."""
    found = thread.snapshot
    conf: dict[str, Any] = {"thread_id": thread.thread_id, "checkpoint_ns": ""}
    if thread.parent_id:
        conf["checkpoint_id"] = thread.parent_id
    saved = memory.put({"configurable": conf}, found.checkpoint, found.metadata,
                       dict(found.checkpoint.get("channel_versions", {})))
    by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task, channel, value in found.pending_writes or []:
        by_task[task].append((channel, value))
    for task, writes in by_task.items():
        memory.put_writes(saved, writes, task)
    return {"configurable": {"thread_id": thread.thread_id}}
