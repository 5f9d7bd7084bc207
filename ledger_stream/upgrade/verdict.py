"""What an upgrade does to one thread, from what its dry run asked and what the ledger
holds. Pure: no Kafka, no graph.

Each intent the new code made in the dry run was answered by the decision core itself
(``decide``, on the key's state as the ledger holds it), so the verdict is the ledger's own
answer, not a guess:

- ``safe``: the same key with the same arguments hash: the ledger answers the original
  receipt;
- ``new_effect``: a key the ledger does not hold: the thread's work still to do (reported,
  not unsafe by itself);
- ``conflict``: the same key with other arguments: the new code would be rejected;
- ``rejected``: refused for another reason (an approval bound to other arguments, an
  expired key);
- ``held``: held as an incompatible version while the old one's effect is in flight: the
  thread would be left holding a ``held`` receipt that nothing settles (unsafe);
- ``orphan``: the ledger holds an intent of the pending step that the new code no longer
  makes (its receipt would never reach the thread);
- ``dropped_task``: a pending step in a node the new graph no longer has (LangGraph drops it
  silently);
- ``error``: the new code raised while resuming the thread;
- ``waiting``: the dry run stopped at an ``interrupt()`` or a static breakpoint it had no
  answer for, or after its round limit (what comes after it was not checked).

Every ask of a key is judged and the worst answer kept (a later step may ask a key again
with other arguments). A thread is unsafe when it has a conflict, a rejection, a held
version, an orphan, a dropped task or an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ledger_stream.domain import events as ev
from ledger_stream.domain.state import KeyState, Phase


class Kind(StrEnum):
    SAFE = "safe"
    NEW_EFFECT = "new_effect"
    CONFLICT = "conflict"
    REJECTED = "rejected"
    HELD = "held"
    ORPHAN = "orphan"
    DROPPED_TASK = "dropped_task"
    ERROR = "error"
    WAITING = "waiting"


UNSAFE = frozenset({Kind.CONFLICT, Kind.REJECTED, Kind.HELD, Kind.ORPHAN, Kind.DROPPED_TASK,
                    Kind.ERROR})
# The worst answer a key got wins (a key asked twice reports one finding).
_SEVERITY = (Kind.SAFE, Kind.NEW_EFFECT, Kind.HELD, Kind.REJECTED, Kind.CONFLICT)


@dataclass(frozen=True)
class Finding:
    kind: Kind
    key: str = ""  # the operation key, when the finding is about one
    node: str = ""  # the node (or the tool) it is about
    detail: str = ""


@dataclass(frozen=True)
class Asked:
    """One intent the new code made in the dry run, and the ledger's answer to it."""

    intent: ev.Intent
    state: KeyState  # the key's state as the ledger held it when asked
    receipt: ev.Receipt


@dataclass(frozen=True)
class ThreadVerdict:
    thread_id: str
    checkpoint_id: str
    pending_nodes: tuple[str, ...]
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def unsafe(self) -> bool:
        return any(f.kind in UNSAFE for f in self.findings)

    @property
    def verdict(self) -> str:
        if self.unsafe:
            return "unsafe"
        return "waiting" if any(f.kind is Kind.WAITING for f in self.findings) else "safe"


def judge(thread_id: str, checkpoint_id: str, pending_nodes: Sequence[str],
          dropped: Sequence[str], asked: Sequence[Asked],
          step_intents: Sequence[ev.Intent], waiting_in: Sequence[str] = (),
          error: str = "") -> ThreadVerdict:
    """The verdict on one thread.

    ``pending_nodes``: the root graph's pending nodes; ``dropped``: pending nodes the new
    graph (or its subgraph) lacks, as ``node`` or ``subgraph-node/node``; ``asked``: the
    dry run's intents, in order; ``step_intents``: the intents the ledger holds that the
    thread has no receipt for (its pending steps'); ``waiting_in``: where the run stopped
    for an answer; ``error``: what the new code raised, if it did.
    """
    findings = [Finding(Kind.DROPPED_TASK, node=node, detail=f"the pending step in {node!r} "
                        "is not a node of the new graph: LangGraph drops it")
                for node in dropped]
    worst: dict[str, Finding] = {}
    for one in asked:
        found = _answer(one)
        held = worst.get(one.intent.key)
        if held is None or _SEVERITY.index(found.kind) > _SEVERITY.index(held.kind):
            worst[one.intent.key] = found
    findings += worst.values()
    seen = set(worst)
    orphans: dict[str, ev.Intent] = {}
    for intent in step_intents:
        if intent.key not in seen:
            orphans.setdefault(intent.key, intent)
    stopped = f" before the run stopped in {', '.join(waiting_in)}" if waiting_in else ""
    findings += [Finding(Kind.ORPHAN, key=key, node=intent.workflow.node, detail=(
        f"the ledger holds an intent of {intent.workflow.graph}@{intent.workflow.version} "
        f"(args {intent.args_hash[:12]}) the thread has no receipt for; the new code did "
        f"not make it{stopped}")) for key, intent in sorted(orphans.items())]
    if error:
        findings.append(Finding(Kind.ERROR, detail=error))
    findings += [Finding(Kind.WAITING, node=node, detail="stopped with no answer (--resume "
                         "gives one): what follows was not checked")
                 for node in waiting_in]
    return ThreadVerdict(thread_id, checkpoint_id, tuple(pending_nodes), tuple(findings))


def _answer(one: Asked) -> Finding:
    intent, state, receipt = one.intent, one.state, one.receipt
    where = dict(key=intent.key, node=intent.workflow.node)
    new_hash = intent.args_hash[:12]
    if receipt.status is ev.ReceiptStatus.REJECTED and receipt.reason is ev.Reason.CONFLICT:
        return Finding(Kind.CONFLICT, **where, detail=(
            f"the ledger holds args {state.args_hash[:12]} from {state.graph}@{state.version}"
            f" ({state.phase.value}); the new code asks {new_hash}"))
    if receipt.status is ev.ReceiptStatus.REJECTED:
        return Finding(Kind.REJECTED, **where, detail=(
            f"the ledger would reject it: {receipt.reason.value}"
            + (f" ({receipt.detail})" if receipt.detail else "")))
    if receipt.status is ev.ReceiptStatus.HELD and receipt.reason is ev.Reason.VERSION:
        return Finding(Kind.HELD, **where, detail=(
            f"the ledger would hold it: {receipt.reason.value}; {state.graph}@{state.version}"
            f" is {state.phase.value}"))
    if state.phase is Phase.ABSENT:
        return Finding(Kind.NEW_EFFECT, **where, detail=(
            f"a key the ledger does not hold: args {new_hash} would be dispatched"))
    frozen = " (held by a freeze)" if receipt.reason is ev.Reason.FROZEN else ""
    return Finding(Kind.SAFE, **where, detail=(
        f"the same args {new_hash}: the ledger answers its receipt ({state.phase.value})"
        + frozen))
