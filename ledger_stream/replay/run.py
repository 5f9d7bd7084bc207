"""Plan a replay from each checkpoint of a thread: the thread is copied, up to the
checkpoint, into memory (history.py), the graph replays it there as LangGraph would
(``invoke(None, config)`` with the checkpoint's id; then ``Command(resume=...)`` with the
answers ``resume`` gives), and every intent it makes is answered by the ledger's decision
core on the key's state as the ledger holds it, never produced (upgrade/check.py's
LedgerProbe). plan.py judges.

As for upgrade-check, the graph's nodes run for real in this process: a model is called,
and an effect made around the ledger would be made. Only intents submitted through this
process's ledger clients are held back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ledger_stream.connector.redaction import unshown
from ledger_stream.domain import events as ev
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState
from ledger_stream.replay.history import Lineage, copy_until, root_history
from ledger_stream.replay.plan import CheckpointPlan, judge_replay
from ledger_stream.sdk.dry_run import dry_run
from ledger_stream.upgrade.check import INTERRUPT_ROUNDS, LedgerProbe, Resume, caught_up
from ledger_stream.upgrade.ledger import Ledger
from ledger_stream.upgrade.threads import pending_nodes


def plan_thread(graph: Any, saver: BaseCheckpointSaver[Any], ledger: Ledger, policy: Policy,
                thread_id: str, *, at_ms: Callable[[], int], resume: Resume | None = None,
                limit: int | None = None, lag_wait_s: float = 30.0,
                progress: Callable[[str], None] = lambda _line: None) -> list[CheckpointPlan]:
    """The plan of a replay from each of the thread's root checkpoints (the newest
    ``limit`` when given), newest first, as the ledger would answer at ``at_ms()``.
    LookupError when the thread has no checkpoint; LedgerBehind when the processor has
    intents it has not decided (the key states read would miss them) and does not catch
    up within ``lag_wait_s``. The thread's recorded intents (one scan of the intents
    topic) that a replay re-runs and does not ask again are its ``orphan`` findings."""
    everything = root_history(saver, thread_id)
    history = everything[:limit]
    if not history:
        raise LookupError(f"thread {thread_id!r} has no checkpoint")
    ends = ledger.intent_ends()  # what was recorded before the plan; later intents may come
    caught_up(lambda: ledger.undecided(ends), lag_wait_s, progress)
    states = StatesRead(ledger)
    recorded = states.thread_intents({thread_id}).get(thread_id, [])
    lineage = Lineage(everything)
    plans = []
    for n, found in enumerate(history, 1):
        rerun = lineage.rerun(str(found.checkpoint["id"]), recorded)
        plans.append(plan_checkpoint(graph, saver, found, LedgerProbe(states, policy, at_ms),
                                     resume, rerun, states))
        progress(f"[{n}/{len(history)}] {plans[-1].checkpoint_id}: {plans[-1].verdict}")
    return plans


def plan_checkpoint(graph: Any, saver: BaseCheckpointSaver[Any], found: CheckpointTuple,
                    probe: LedgerProbe, resume: Resume | None,
                    rerun: Sequence[ev.Intent] = (), states: Ledger | None = None
                    ) -> CheckpointPlan:
    """A replay from ``found`` on a copy of the thread, its intents to ``probe``;
    ``rerun`` the thread's recorded intents of the steps it runs again, the state of each
    key of them the replay did not ask read from ``states`` (the ledger)."""
    thread_id = str(found.config["configurable"]["thread_id"])
    checkpoint_id = str(found.checkpoint["id"])
    memory = InMemorySaver()
    config = copy_until(saver, thread_id, checkpoint_id, memory)
    copy = graph.copy(update={"checkpointer": memory})
    meta = found.metadata or {}
    step = int(meta.get("step", -1)) if isinstance(meta.get("step", -1), int) else -1
    waiting: tuple[str, ...] = ()
    error = ""
    next_nodes = pending_nodes(found)
    try:
        # What LangGraph itself would run next (``__start__`` for an input checkpoint).
        next_nodes = tuple(copy.get_state(config).next) or next_nodes
        with dry_run(probe):
            waiting = asyncio.run(_replay(copy, config, thread_id, resume))
    except Exception as exc:  # the graph's own failure is a finding, not a crash
        error = unshown(exc)
    asked = {one.intent.key for one in probe.asked}
    unasked = [(intent, states.key_state(intent.key)) for intent in rerun
               if states is not None and intent.key not in asked]
    return judge_replay(checkpoint_id, step, str(meta.get("source", "")),
                        next_nodes, probe.asked, waiting, error, unasked)


async def _replay(copy: Any, config: dict[str, Any], thread_id: str,
                  resume: Resume | None) -> tuple[str, ...]:
    """Replay from the checkpoint ``config`` addresses, to the end of the thread; the nodes
    it stopped at for want of an answer."""
    await copy.ainvoke(None, config)
    thread = {"configurable": {"thread_id": thread_id}}
    for rounds in range(INTERRUPT_ROUNDS + 1):
        state = await copy.aget_state(thread)
        if not state.next:
            return ()
        stopped = tuple(sorted({t.name for t in state.tasks if t.interrupts} or state.next))
        if resume is None or rounds == INTERRUPT_ROUNDS or not state.interrupts:
            return stopped
        answers = {i.id: resume(thread_id, i.value) for i in state.interrupts}
        if any(answer is None for answer in answers.values()):
            return stopped
        await copy.ainvoke(Command(resume=answers), thread)
    return ()


class StatesRead:
    """The ledger, each key's state read once for the whole plan: the processor has
    decided every recorded intent and the plan produces none, so a key's state does not
    change under it (and one changelog read per key, not per checkpoint)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._states: dict[str, KeyState] = {}

    def key_state(self, key: str) -> KeyState:
        if key not in self._states:
            self._states[key] = self._ledger.key_state(key)
        return self._states[key]

    def thread_intents(self, thread_ids: Collection[str]) -> dict[str, list[ev.Intent]]:
        return self._ledger.thread_intents(thread_ids)

    def undecided(self, upto: Mapping[int, int] | None = None) -> int:
        return self._ledger.undecided(upto)

    def intent_ends(self) -> dict[int, int]:
        return self._ledger.intent_ends()
