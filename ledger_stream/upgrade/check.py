"""``ledger-stream upgrade-check``: resume every in-flight thread of a checkpointer against
a new graph, in a dry run, and say per thread whether deploying it is safe.

For each thread: its newest checkpoint (with its pending writes) is copied into an
in-memory checkpointer, so the original is never written; the new graph resumes it there
(``invoke(None)``, or ``Command(resume=...)`` with the answers ``resume`` gives for its
interrupts); every intent the run submits is answered by a probe that asks the decision
core (``decide``) what the ledger would answer, given the key's state as the ledger holds it,
and nothing is produced (sdk/dry_run.py). Then verdict.py compares.

The new graph's nodes run for real in this process: a model is called, and an effect made
around the ledger (a direct HTTP call) would be made. Only intents are held back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState
from ledger_stream.sdk.dry_run import dry_run
from ledger_stream.upgrade.ledger import Ledger
from ledger_stream.upgrade.threads import ThreadAt, copy_thread, thread_at, thread_ids
from ledger_stream.upgrade.verdict import Asked, ThreadVerdict, judge

# (thread id, the interrupt's value) -> what a human would answer; None: stop there.
Resume = Callable[[str, Any], Any]
INTERRUPT_ROUNDS = 10  # interrupts answered per thread before the run is left waiting


class LedgerProbe:
    """Answers a dry run's intents as the ledger would: ``decide`` on the key's state, the
    run's own earlier intents included (a second ask of a key sees the first reserved)."""

    def __init__(self, ledger: Ledger, policy: Policy,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._ledger, self._policy, self._clock = ledger, policy, clock
        self._states: dict[str, KeyState] = {}
        self._lock = threading.Lock()
        self.asked: list[Asked] = []

    def answer(self, intent: ev.Intent) -> ev.Receipt:
        with self._lock:
            state = self._states.get(intent.key)
        if state is None:
            state = self._ledger.key_state(intent.key)
        decision = decide(state, intent, self._policy, self._clock())
        receipt = next(o for o in decision.outputs if isinstance(o, ev.Receipt)
                       and o.intent_event_id == intent.event_id)
        with self._lock:
            self._states[intent.key] = decision.state
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
    """Resume ``thread`` with ``graph`` on a copy of its checkpoint, intents to ``probe``."""
    memory = InMemorySaver()
    config = copy_thread(thread, memory)
    copy = graph.copy(update={"checkpointer": memory})
    waiting: tuple[str, ...] = ()
    try:
        with dry_run(probe):
            for _round in range(INTERRUPT_ROUNDS + 1):
                state = copy.get_state(config)
                if state.interrupts:
                    nodes = tuple(sorted({t.name for t in state.tasks if t.interrupts}))
                    if resume is None or _round == INTERRUPT_ROUNDS:
                        waiting = nodes
                        break
                    answers = {i.id: resume(thread.thread_id, i.value)
                               for i in state.interrupts}
                    copy.invoke(Command(resume=answers), config)
                elif state.next:
                    copy.invoke(None, config)
                else:
                    break
    except Exception as exc:  # the new code's own failure is a finding, not a crash
        return DryRun(tuple(probe.asked), waiting, f"{type(exc).__name__}: {exc}")
    return DryRun(tuple(probe.asked), waiting, "")


def check_threads(graph: Any, saver: BaseCheckpointSaver[Any], ledger: Ledger,
                  policy: Policy, *, threads: Sequence[str] = (),
                  resume: Resume | None = None,
                  progress: Callable[[str], None] = lambda _line: None
                  ) -> list[ThreadVerdict]:
    """The verdict on each in-flight thread (each of ``threads`` when given: a named thread
    that is not in flight is reported safe, with nothing pending)."""
    found = [t for t in _threads(saver, threads, progress) if t.in_flight or threads]
    progress(f"{len(found)} threads in flight")
    step_ids = {cid for t in found for cid in t.step_checkpoints}
    held = ledger.step_intents(step_ids) if step_ids else {}
    nodes = set(graph.nodes)
    verdicts = []
    for n, thread in enumerate(found, 1):
        run = resume_dry(graph, thread, LedgerProbe(ledger, policy), resume) \
            if thread.in_flight else DryRun((), (), "")
        step_intents = [i for cid in sorted(thread.step_checkpoints) for i in held.get(cid, [])
                        if i.key not in thread.acknowledged]
        verdicts.append(judge(thread.thread_id, thread.checkpoint_id, thread.pending_nodes,
                              nodes, run.asked, step_intents, run.waiting_in, run.error))
        progress(f"[{n}/{len(found)}] {thread.thread_id}: {verdicts[-1].verdict}")
    return verdicts


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
