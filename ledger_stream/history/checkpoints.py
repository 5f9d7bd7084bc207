"""The workflow side of a key's evidence: for each thread its intents name, the checkpoints
around each step that asked for the key, read from the thread's LangGraph checkpointer.

A step is (thread, checkpoint): the intent's ``workflow.checkpoint_id`` is the checkpoint
the step ran from (langgraph/origin.py), so *before* is that checkpoint and *after* is each
checkpoint whose parent it is (the step's result; several when a replay or a fork ran the
step again on a branch of its own; none while the step has not finished, e.g. after a
crash). Each checkpoint comes with its pending tasks (the nodes it triggers next, and the
tasks that recorded writes against it: an interrupt, an error, a finished task of a step
that did not complete) and its pending writes.

Redaction: no channel value, write value, interrupt value or metadata value the ledger does
not own is shown. Channel values and writes may hold the effect's arguments (a tool call's
arguments, an approval's payload), so each is its channel name, version, serialised type,
size and digest. The digest is an HMAC-SHA256 of the saver's own serialisation under a key
drawn at random for each document and never kept: within one document equal digests mean
equal values (the same messages before and after a step), but a digest cannot be reversed
by trying values (a plain SHA-256 of an amount can) nor compared across documents. Of the
checkpoint metadata only ``source``, ``step`` and ``parents`` are shown; other keys
(LangGraph copies a run's configurable values there) are named, their values withheld.

The saver is only read (``get_tuple``, ``list``); open it read-only
(``ledger_stream.cli.checkpointer``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

# Checkpoints of one thread read to find a step's children; a longer thread's oldest
# checkpoints are not searched (said in the document).
THREAD_LIMIT = 2_000
TRIGGER = "branch:to:"
SHOWN_METADATA = ("source", "step", "parents")


def workflow_side(saver: Any, intent_rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per thread the intents (timeline rows of ``Intent`` events) name, in the
    order the ledger saw them first."""
    threads: dict[str, dict[str, Any]] = {}
    unnamed: list[str] = []
    for row in intent_rows:
        thread = row.get("thread") or ""
        if not thread:
            unnamed.append(str(row.get("intent_event_id")))
            continue
        entry = threads.setdefault(thread, {"thread_id": thread, "workflows": [],
                                            "steps": {}})
        if row.get("workflow") and row["workflow"] not in entry["workflows"]:
            entry["workflows"].append(row["workflow"])
        step = entry["steps"].setdefault(row.get("checkpoint") or "", {
            "checkpoint_id": row.get("checkpoint") or "", "node": row.get("node"),
            "intents": []})
        step["intents"].append({"intent_event_id": row.get("intent_event_id"),
                                "origin": row.get("origin"),
                                "ledger_time_ms": row.get("ledger_time_ms")})
    digests = Digests()  # one key for the document: its digests compare with each other
    sides = [_thread(saver, entry, digests) for entry in threads.values()]
    if unnamed:
        sides.append({"thread_id": None, "intents": unnamed,
                      "note": "these intents name no thread: no checkpoint to show"})
    return sides


def _thread(saver: Any, entry: dict[str, Any], digests: Digests) -> dict[str, Any]:
    thread = entry["thread_id"]
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    history = list(saver.list(config, limit=THREAD_LIMIT))  # newest first
    by_id = {_id(t.config): t for t in history}
    graph, _, version = (entry["workflows"][0] if entry["workflows"] else "@").partition("@")
    side: dict[str, Any] = {
        "thread_id": thread, "graph": graph or None, "version": version or None,
        "workflows": entry["workflows"], "thread_config": config["configurable"],
        "checkpoints_in_thread": len(history),
        "latest_checkpoint_id": _id(history[0].config) if history else None,
        "steps": [_step(step, by_id, history, digests) for step in entry["steps"].values()]}
    if not history:
        side["note"] = "the checkpointer holds no checkpoint of this thread"
    elif len(history) == THREAD_LIMIT:
        side["note"] = f"only the newest {THREAD_LIMIT} checkpoints were searched"
    return side


def _step(step: dict[str, Any], by_id: Mapping[str, Any], history: list[Any],
          digests: Digests) -> dict[str, Any]:
    checkpoint_id = step["checkpoint_id"]
    before = by_id.get(checkpoint_id)
    children = sorted((t for t in history if _parent(t) == checkpoint_id and checkpoint_id),
                      key=lambda t: _id(t.config))
    out = {**step, "before": checkpoint(before, digests) if before is not None else None,
           "after": [checkpoint(t, digests) for t in children]}
    if not checkpoint_id:
        out["note"] = "the intents name no checkpoint (the step's config carried none)"
    elif before is None:
        out["note"] = "the checkpoint the intents name is not in the checkpointer"
    elif not children:
        out["note"] = "no checkpoint after this step: it has not finished (or was cut short)"
    return out


def checkpoint(found: Any, serde: Digests) -> dict[str, Any]:
    """One checkpoint tuple, redacted (module doc), digests under ``serde``'s key."""
    body, metadata = found.checkpoint, dict(found.metadata or {})
    values: Mapping[str, Any] = body.get("channel_values") or {}
    versions: Mapping[str, Any] = body.get("channel_versions") or {}
    return {
        "checkpoint_id": _id(found.config),
        "parent_checkpoint_id": _parent(found) or None,
        "ts": body.get("ts"),
        **{name: metadata.get(name) for name in SHOWN_METADATA},
        "metadata_withheld": sorted(k for k in metadata if k not in SHOWN_METADATA),
        "updated_channels": list(body.get("updated_channels") or []),
        "channels": [{"name": name, "version": str(versions.get(name, "")),
                      **serde.of(values[name])} for name in sorted(values)],
        "next": next_nodes(body),
        "pending_tasks": _tasks(found.pending_writes or []),
        "pending_writes": [{"task_id": task, "channel": channel, **serde.of(value)}
                           for task, channel, value in (found.pending_writes or [])],
    }


def next_nodes(body: Mapping[str, Any]) -> list[str]:
    """The nodes the checkpoint triggers: a ``branch:to:NODE`` channel holding a value at a
    version the node has not seen (LangGraph's own trigger rule for StateGraph nodes)."""
    values = body.get("channel_values") or {}
    seen = body.get("versions_seen") or {}
    found = []
    for channel, version in (body.get("channel_versions") or {}).items():
        node = channel.removeprefix(TRIGGER)
        if channel.startswith(TRIGGER) and channel in values \
                and str(version) > str((seen.get(node) or {}).get(channel, "")):
            found.append(node)
    return sorted(found)


def _tasks(writes: Iterable[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    """Tasks that recorded writes against the checkpoint, and what kind of writes."""
    tasks: dict[str, dict[str, Any]] = {}
    for task, channel, _ in writes:
        entry = tasks.setdefault(task, {"task_id": task, "channels": [], "interrupted": False,
                                        "error": False})
        entry["channels"].append(channel)
        entry["interrupted"] |= channel == "__interrupt__"
        entry["error"] |= channel == "__error__"
    return list(tasks.values())


class Digests:
    """Type, size and keyed digest of a value as the checkpointer serialises it; one key,
    drawn at random, per instance (module doc)."""

    def __init__(self) -> None:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        self._serde = JsonPlusSerializer()
        self._key = secrets.token_bytes(32)

    def of(self, value: Any) -> dict[str, Any]:
        try:
            kind, data = self._serde.dumps_typed(value)
        except Exception as exc:  # a value the serializer cannot write: say so, not why
            return {"type": type(value).__name__, "size": None, "digest": None,
                    "unserialisable": type(exc).__name__}
        return {"type": kind, "size": len(data),
                "digest": hmac.new(self._key, data, hashlib.sha256).hexdigest()}


def _id(config: Mapping[str, Any] | None) -> str:
    return str(((config or {}).get("configurable") or {}).get("checkpoint_id") or "")


def _parent(found: Any) -> str:
    return _id(found.parent_config)
