"""Which kind of run asked for an effect: the intent's ``origin``, from what LangGraph tells
the step that asks, so receipts, timelines and alerts say whether a fork, a replay or a
resume repeated it.

LangGraph 1.x passes, in the step's ``config["configurable"]``:

- ``__pregel_replay_state``: set for a whole run that started from a past checkpoint it was
  addressed at (time travel); its ``checkpoint_id`` is that checkpoint;
- ``checkpoint_map[""]``: the root graph's checkpoint this step runs from;
- ``__pregel_resuming``: true during the first step of a run that continues a thread
  (``invoke(None)``, ``Command(resume=...)``): the step a crash or an ``interrupt()`` cut
  short runs again from its top.

A time-travel run starts a branch: LangGraph writes the branch's first checkpoint, the
child of the one addressed, with source ``fork`` when it re-runs history as it was (a
replay) and ``update`` when ``update_state`` changed the state first (a fork). Origins:

- ``replay``: a time-travel run from a checkpoint as it was; ``checkpoint_id`` names it;
- ``fork``: a time-travel run from a checkpoint ``update_state`` made; ``checkpoint_id``
  names the fork (the ``update`` checkpoint);
- ``resume``: the first step of a run that continues a thread;
- ``fresh``: anything else (a step running for the first time).

When the branch cannot be told (no checkpointer in the config, one that cannot be read from
this thread, a checkpoint not saved yet while earlier runs branched from the same one, or a
branch longer than the bounds below), a time-travel run is called ``replay``, naming the
checkpoint it re-runs: a re-run either way, never another branch's name.

A fork continued after an ``interrupt()`` (the usual approval pattern: the fork stops at
the approval, then ``Command(resume=...)``) is reported as ``resume``: the continuing run is
not a time-travel run, and telling a fork's branch from the thread's own history would need
every checkpoint's ancestry. Its checkpoint still names the step's place on the branch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger_stream.domain.events import Origin
from ledger_stream.logs import log_fields

logger = logging.getLogger(__name__)

# Checkpoints read to find the start of a time-travel branch: walked back from the step's
# own, then listed from the thread's newest. Bounded, so a long branch costs each step the
# same (past the bounds, a fork may be reported as a replay of the checkpoint addressed).
BRANCH_WALK_LIMIT = 25
HISTORY_LIMIT = 200


@dataclass(frozen=True)
class StepOrigin:
    origin: Origin
    checkpoint_id: str  # see the module doc: the fork, the replayed or the current one


def step_origin(config: Mapping[str, Any] | None) -> StepOrigin:
    """The origin of the step running with ``config`` (its RunnableConfig)."""
    conf: Mapping[str, Any] = (config or {}).get("configurable") or {}
    checkpoints = conf.get("checkpoint_map") or {}
    current = str(checkpoints.get("") or conf.get("checkpoint_id") or "")
    replayed = getattr(conf.get("__pregel_replay_state"), "checkpoint_id", None)
    if replayed:
        start = _branch_start(conf, current, str(replayed))
        if start is not None and start[1] == "update":
            return StepOrigin(Origin.FORK, start[0])
        return StepOrigin(Origin.REPLAY, str(replayed))
    if conf.get("__pregel_resuming"):
        return StepOrigin(Origin.RESUME, current)
    return StepOrigin(Origin.FRESH, current)


def _branch_start(conf: Mapping[str, Any], current: str, addressed: str
                  ) -> tuple[str, str] | None:
    """(id, source) of the branch's first checkpoint: the child of ``addressed`` on the way
    back from ``current``. A checkpoint saved in the background (durability ``async``) may
    not be readable yet: then the only branch start (a child of ``addressed`` with source
    ``update`` or ``fork``; the original run's own child is a ``loop``) in the thread's
    recent history. None when neither tells (several: other runs from the same
    checkpoint)."""
    saver, thread = conf.get("__pregel_checkpointer"), conf.get("thread_id")
    if saver is None:
        return None
    try:
        checkpoint_id = current
        for _ in range(BRANCH_WALK_LIMIT):
            if not checkpoint_id:
                break
            found = saver.get_tuple({"configurable": {
                "thread_id": thread, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
            if found is None:
                break
            if _parent(found) == addressed:
                return checkpoint_id, str((found.metadata or {}).get("source", ""))
            checkpoint_id = _parent(found)
        history = saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
                             limit=HISTORY_LIMIT)
        children = [found for found in history if _parent(found) == addressed
                    and (found.metadata or {}).get("source") in ("update", "fork")]
        if len(children) == 1:  # several: earlier runs from the same checkpoint, unknown
            return (str(children[0].config["configurable"]["checkpoint_id"]),  # which is ours
                    str((children[0].metadata or {}).get("source", "")))
    except Exception as exc:  # a saver that cannot be read from here (an async one)
        logger.debug("branch not readable", extra=log_fields(error=str(exc)))
    return None


def _parent(found: Any) -> str:
    return str(((found.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
               or "")
