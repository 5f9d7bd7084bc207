"""``ledger-stream upgrade-check``: resume every in-flight thread of a checkpointer against
a new graph, in a dry run, and say per thread whether deploying it is safe.

For each thread: its newest checkpoints (the root's and each subgraph's, with their pending
writes) are copied into an in-memory checkpointer, so the original is never written; the
new graph resumes it there (``ainvoke(None)``: an interrupted node runs again up to its
``interrupt()``, as it would on a resume; then ``Command(resume=...)`` with the answers
``resume`` gives, or ``None`` past a static breakpoint, up to ``INTERRUPT_ROUNDS`` times).
Every intent the run submits is answered by a probe that asks the decision core
(``decide``) what the ledger would answer, given the key's state as the ledger holds it,
and nothing is produced (sdk/dry_run.py). Then verdict.py compares.

The new graph's nodes run for real in this process: a model is called, and an effect made
around the ledger (a direct HTTP call, an intent sent through the gateway) would be made.
Only intents submitted through this process's ledger clients are held back.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ledger_stream.connector.redaction import unshown
from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState
from ledger_stream.sdk.dry_run import dry_run
from ledger_stream.upgrade.ledger import Ledger
from ledger_stream.upgrade.threads import (
    ThreadAt,
    copy_thread,
    has_checkpoint,
    thread_at,
    thread_ids,
)
from ledger_stream.upgrade.verdict import Asked, ThreadVerdict, judge

# (thread id, the interrupt's value) -> what a human would answer; None: stop there.
Resume = Callable[[str, Any], Any]
INTERRUPT_ROUNDS = 10  # answers given per thread before the run is left waiting
REPLAYED = (ev.Origin.REPLAY, ev.Origin.FORK)


class LedgerProbe:
    """Answers a dry run's intents as the ledger would: ``decide`` on the key's state, the
    run's own earlier intents included (a second ask of a key sees the first reserved).
    One key is decided at a time, as the processor does (parallel tasks asking one key)."""

    def __init__(self, ledger: Ledger, policy: Policy,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._ledger, self._policy, self._clock = ledger, policy, clock
        self._states: dict[str, KeyState] = {}
        self._locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._lock = threading.Lock()
        self.asked: list[Asked] = []

    def answer(self, intent: ev.Intent) -> ev.Receipt:
        with self._lock:
            key_lock = self._locks[intent.key]
        with key_lock:
            state = self._states.get(intent.key)
            if state is None:
                state = self._ledger.key_state(intent.key)
            decision = decide(state, intent, self._policy, self._clock())
            receipt = next(o for o in decision.outputs if isinstance(o, ev.Receipt)
                           and o.intent_event_id == intent.event_id)
            self._states[intent.key] = decision.state
        with self._lock:
            self.asked.append(Asked(intent, state, receipt))
        return receipt


@dataclass(frozen=True)
class DryRun:
    """What resuming one thread under the new graph did."""

    asked: tuple[Asked, ...]
    waiting_in: tuple[str, ...]
    error: str


def resume_dry(graph: Any, thread: ThreadAt, probe: LedgerProbe,
               resume: Resume | None) -> DryRun:
    """Resume ``thread`` with ``graph`` on a copy of its checkpoints, intents to ``probe``."""
    memory = InMemorySaver()
    config = copy_thread(thread, memory)
    copy = graph.copy(update={"checkpointer": memory})
    paused = _at_breakpoint(copy, thread)
    if paused and resume is None:  # resuming would go past it: a human's decision
        return DryRun((), paused, "")
    try:
        with dry_run(probe):
            waiting = asyncio.run(_drive(copy, config, thread.thread_id, resume))
    except Exception as exc:  # the new code's own failure is a finding, not a crash
        return DryRun(tuple(probe.asked), (), unshown(exc))
    return DryRun(tuple(probe.asked), waiting, "")


def _at_breakpoint(graph: Any, thread: ThreadAt) -> tuple[str, ...]:
    """The pending nodes the thread is paused before at a static breakpoint of the graph
    (``interrupt_before``): pending, nothing of the step run yet, no interrupt() waiting."""
    before = getattr(graph, "interrupt_before_nodes", None) or ()
    if thread.waiting or not before or thread.snapshots[0].pending_writes:
        return ()
    return tuple(node for node in thread.pending_nodes if before == "*" or node in before)


async def _drive(copy: Any, config: dict[str, Any], thread_id: str,
                 resume: Resume | None) -> tuple[str, ...]:
    """Run the thread to its end; the nodes it stopped at for want of an answer."""
    given: Any = None
    for rounds in range(INTERRUPT_ROUNDS + 1):
        await copy.ainvoke(given, config)
        state = await copy.aget_state(config)
        if not state.next:
            return ()
        stopped = tuple(sorted({t.name for t in state.tasks if t.interrupts} or state.next))
        if resume is None or rounds == INTERRUPT_ROUNDS:
            return stopped
        if state.interrupts:  # interrupt(): a human's answer for each
            answers = {i.id: resume(thread_id, i.value) for i in state.interrupts}
            if any(answer is None for answer in answers.values()):
                return stopped
            given = Command(resume=answers)
        else:  # a static breakpoint (interrupt_before / interrupt_after): go on
            given = None
    return ()


def check_threads(graph: Any, saver: BaseCheckpointSaver[Any], ledger: Ledger,
                  policy: Policy, *, threads: Sequence[str] = (),
                  resume: Resume | None = None, lag_wait_s: float = 30.0,
                  progress: Callable[[str], None] = lambda _line: None
                  ) -> list[ThreadVerdict]:
    """The verdict on each in-flight thread (each of ``threads`` when given: a named thread
    that is not in flight is reported safe, with nothing pending). LedgerBehind when the
    processor has intents it has not decided and does not catch up within
    ``lag_wait_s``: the key states read would miss them."""
    ends = ledger.intent_ends()  # what was recorded before the check; later intents may come
    caught_up(lambda: ledger.undecided(ends), lag_wait_s, progress)
    found = [t for t in _threads(saver, threads, progress)
             if threads or t.in_flight or _pending_for(graph, t)]
    progress(f"{len(found)} threads in flight")
    held = ledger.thread_intents({t.thread_id for t in found}) if found else {}
    verdicts = []
    for n, thread in enumerate(found, 1):
        run = resume_dry(graph, thread, LedgerProbe(ledger, policy), resume)
        unanswered = _unanswered(saver, thread, held.get(thread.thread_id, []))
        verdicts.append(judge(thread.thread_id, thread.checkpoint_id, thread.pending_nodes,
                              dropped(graph, thread), run.asked, unanswered, run.waiting_in,
                              run.error))
        progress(f"[{n}/{len(found)}] {thread.thread_id}: {verdicts[-1].verdict}")
    return verdicts


class LedgerBehind(RuntimeError):
    """The processor has not decided every recorded intent: its state is not the ledger's."""


def caught_up(undecided: Callable[[], int], wait_s: float,
              progress: Callable[[str], None]) -> None:
    """Wait up to ``wait_s`` for the processor to have decided every intent ``undecided()``
    counts (those recorded before the wait began: under steady traffic the whole lag is
    never 0); LedgerBehind when it has not."""
    deadline = time.monotonic() + wait_s
    while (behind := undecided()) > 0:
        if time.monotonic() >= deadline:
            raise LedgerBehind(f"the processor has {behind} intents it has not decided yet: "
                               "the key states would miss them (is it running?)")
        progress(f"waiting for the processor: {behind} intents not decided yet")
        time.sleep(0.5)


def _pending_for(graph: Any, thread: ThreadAt) -> bool:
    """Whether the new graph sees work in the thread (one the checkpoint's channels do not
    show, such as the functional API's)."""
    memory = InMemorySaver()
    state = graph.copy(update={"checkpointer": memory}).get_state(copy_thread(thread, memory))
    return bool(state.next or state.interrupts)


def dropped(graph: Any, thread: ThreadAt) -> list[str]:
    """Pending nodes the new graph lacks: ``node`` in the root graph, ``path/node`` in a
    subgraph (``path`` the subgraph's node names, joined by ``|``)."""
    subgraphs: dict[str, Any] | None = None
    lost = []
    for pending in thread.pending:
        if not pending.namespace:
            lost += [node for node in pending.nodes if node not in graph.nodes]
            continue
        if subgraphs is None:
            subgraphs = dict(graph.get_subgraphs(recurse=True))
        path = "|".join(part.split(":", 1)[0] for part in pending.namespace.split("|"))
        sub = subgraphs.get(path)
        lost += [f"{path}/{node}" for node in pending.nodes
                 if sub is None or node not in sub.nodes]
    return lost


def _unanswered(saver: BaseCheckpointSaver[Any], thread: ThreadAt,
                intents: Iterable[ev.Intent]) -> list[ev.Intent]:
    """The thread's intents it holds no receipt for that its pending work made: those of
    its pending step (by checkpoint), of a replay or fork run newer than its newest
    checkpoint, or of a step whose checkpoint was never saved (durability ``async`` or
    ``exit`` and a crash)."""
    known: dict[str, bool] = {}

    def saved(checkpoint_id: str) -> bool:
        if checkpoint_id not in known:
            known[checkpoint_id] = has_checkpoint(saver, thread.thread_id, checkpoint_id)
        return known[checkpoint_id]

    out = []
    for intent in intents:
        at = intent.workflow.checkpoint_id
        if intent.key in thread.acknowledged or not at:
            continue
        if at in thread.step_checkpoints or not saved(at) or (
                intent.origin in REPLAYED and intent.at_ms >= thread.ts_ms):
            out.append(intent)
    return out


def _threads(saver: BaseCheckpointSaver[Any], named: Sequence[str],
             progress: Callable[[str], None]) -> Iterable[ThreadAt]:
    for n, thread_id in enumerate(named or thread_ids(saver), 1):
        if n % 1000 == 0:
            progress(f"read {n} threads")
        found = thread_at(saver, thread_id)
        if found is not None:
            yield found
        elif named:
            raise LookupError(f"thread {thread_id!r} has no checkpoint")
