"""The threads a checkpointer holds, as an upgrade sees them: which are in flight (a step
pending, or an ``interrupt()`` waiting), which nodes their pending steps would run, and a
copy of each thread's newest checkpoints for a dry run that never writes to the original.

Pending nodes are read from the checkpoints themselves, not from any graph, since a new
graph that lacks a node drops its pending task without a word (falsification scenario 13).
LangGraph 1.x marks a node triggered by a value in its ``branch:to:<node>`` channel, a join
(``add_edge(["a", "b"], "c")``) by a ``join:a+b:c`` channel that has seen every start, and
a ``Send`` by a packet in ``__pregel_tasks`` (in the checkpoint or in the pending step's
writes). A subgraph keeps checkpoints of its own, in namespace ``<node>:<task id>`` (nested:
joined by ``|``): the newest of every namespace is read and copied too, and its pending
nodes are checked against the new graph's subgraph.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

BRANCH = "branch:to:"
JOIN = "join:"
TASKS = "__pregel_tasks"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
RECEIPTS = "ledger_receipts"  # the state field ledger_tool and LedgerMiddleware write


@dataclass(frozen=True)
class Pending:
    """A namespace's pending step: ``namespace`` "" is the root graph."""

    namespace: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class ThreadAt:
    """A thread's newest checkpoints (the root's, and each subgraph's)."""

    thread_id: str
    checkpoint_id: str  # the root's newest
    parent_id: str
    source: str  # the root checkpoint's metadata source: input, loop, update, fork
    ts_ms: int  # when the root checkpoint was written (the worker's clock)
    pending: tuple[Pending, ...]  # namespaces with a pending step, the root first
    waiting: bool  # an interrupt() is waiting for an answer
    # Keys the thread holds receipts for: its state's ``ledger_receipts`` (the root's and
    # its subgraphs'), and the writes of the pending step's tasks that finished (resuming
    # does not run those again).
    acknowledged: frozenset[str]
    snapshots: tuple[CheckpointTuple, ...]  # the newest per namespace, the root first

    @property
    def pending_nodes(self) -> tuple[str, ...]:
        """The root graph's pending nodes."""
        return next((p.nodes for p in self.pending if p.namespace == ""), ())

    @property
    def in_flight(self) -> bool:
        return bool(self.pending) or self.waiting

    @property
    def step_checkpoints(self) -> frozenset[str]:
        """The checkpoint ids intents of the pending step carry (langgraph/origin.py): the
        root's newest, and for the first step of a replay branch the checkpoint replayed."""
        ids = {self.checkpoint_id}
        if self.source == "fork" and self.parent_id:
            ids.add(self.parent_id)
        return frozenset(ids)


def thread_ids(saver: BaseCheckpointSaver[Any]) -> list[str]:
    """Every thread with a root checkpoint, each once, sorted: a query of the saver's own
    table for the SQLite and PostgreSQL savers, a walk of every checkpoint otherwise."""
    rows = _query(saver, "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = "
                  "'' ORDER BY thread_id", ())
    if rows is not None:
        return [str(row[0]) for row in rows]
    seen: set[str] = set()
    for found in saver.list(None):
        conf = found.config["configurable"]
        if conf.get("checkpoint_ns", "") == "":
            seen.add(str(conf["thread_id"]))
    return sorted(seen)


def namespaces(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[str]:
    """The checkpoint namespaces of a thread: "" and its subgraphs'."""
    marker = "%s" if _is_postgres(saver) else "?"
    rows = _query(saver, "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = "
                  f"{marker}", (thread_id,))
    if rows is not None:
        return sorted(str(row[0]) for row in rows)
    return sorted({str(f.config["configurable"].get("checkpoint_ns", ""))
                   for f in saver.list({"configurable": {"thread_id": thread_id}})})


def has_checkpoint(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_id: str) -> bool:
    """Whether the thread's root history has this checkpoint."""
    return saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                             "checkpoint_id": checkpoint_id}}) is not None


def _is_postgres(saver: BaseCheckpointSaver[Any]) -> bool:
    return type(saver).__name__ == "PostgresSaver" and hasattr(saver, "_cursor")


def _query(saver: BaseCheckpointSaver[Any], query: str, params: tuple[Any, ...]
           ) -> list[tuple[Any, ...]] | None:
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        return [tuple(row) for row in conn.execute(query, params).fetchall()]
    if _is_postgres(saver):
        with saver._cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(query, params)
            return [tuple(row.values()) if isinstance(row, Mapping) else tuple(row)
                    for row in cur.fetchall()]
    return None


def thread_at(saver: BaseCheckpointSaver[Any], thread_id: str) -> ThreadAt | None:
    """The thread's newest checkpoints, or None when it has no root checkpoint."""
    root = _newest(saver, thread_id, "")
    if root is None:
        return None
    snapshots = [root] + [found for ns in namespaces(saver, thread_id) if ns
                          for found in [_newest(saver, thread_id, ns)] if found is not None]
    pending = [Pending(_namespace(found), nodes) for found in snapshots
               for nodes in [pending_nodes(found)] if nodes]
    writes = [w for found in snapshots for w in found.pending_writes or []]
    interrupted = {task for task, channel, _value in writes if channel == INTERRUPT}
    answered = {task for task, channel, _value in writes if channel == RESUME}
    acknowledged = {key for found in snapshots for key in _receipt_keys(
        found.checkpoint.get("channel_values", {}).get(RECEIPTS))}
    for _task, channel, value in writes:
        if channel == RECEIPTS:
            acknowledged |= set(_receipt_keys(value))
    parent = ((root.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
    return ThreadAt(thread_id, str(root.checkpoint["id"]), str(parent or ""),
                    str((root.metadata or {}).get("source", "")), _ts_ms(root),
                    tuple(pending), bool(interrupted - answered), frozenset(acknowledged),
                    tuple(snapshots))


def pending_nodes(found: CheckpointTuple) -> tuple[str, ...]:
    """The nodes a checkpoint's next step would run, from its channels and writes."""
    values = found.checkpoint.get("channel_values", {})
    nodes = {channel[len(BRANCH):] for channel in values if channel.startswith(BRANCH)}
    for channel, seen in values.items():
        if channel.startswith(JOIN):  # join:<start>+<start>:<node>, its value the starts seen
            starts, _, node = channel[len(JOIN):].rpartition(":")
            if isinstance(seen, Iterable) and set(starts.split("+")) <= set(seen):
                nodes.add(node)
    packets = list(values.get(TASKS) or [])
    packets += [value for _task, channel, value in found.pending_writes or []
                if channel == TASKS]
    nodes |= {str(packet.node) for packet in packets if hasattr(packet, "node")}
    return tuple(sorted(nodes))


def _newest(saver: BaseCheckpointSaver[Any], thread_id: str, ns: str) -> CheckpointTuple | None:
    return saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}})


def _namespace(found: CheckpointTuple) -> str:
    return str(found.config["configurable"].get("checkpoint_ns", ""))


def _receipt_keys(value: Any) -> list[str]:
    return [str(key) for key in value] if isinstance(value, Mapping) else []


def _ts_ms(found: CheckpointTuple) -> int:
    try:
        return int(datetime.fromisoformat(str(found.checkpoint["ts"])).timestamp() * 1000)
    except (KeyError, ValueError):
        return 0


def copy_thread(thread: ThreadAt, memory: InMemorySaver) -> dict[str, Any]:
    """Put the thread's newest checkpoints (every namespace) and their pending writes into
    ``memory``; returns the config that addresses the thread there."""
    for found in thread.snapshots:
        conf: dict[str, Any] = {"thread_id": thread.thread_id,
                                "checkpoint_ns": _namespace(found)}
        parent = ((found.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
        if parent:
            conf["checkpoint_id"] = parent
        saved = memory.put({"configurable": conf}, found.checkpoint, found.metadata,
                           dict(found.checkpoint.get("channel_versions", {})))
        by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
        for task, channel, value in found.pending_writes or []:
            by_task[task].append((channel, value))
        for task, writes in by_task.items():
            memory.put_writes(saved, writes, task)
    return {"configurable": {"thread_id": thread.thread_id}}
