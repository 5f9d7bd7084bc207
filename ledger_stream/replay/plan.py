"""What a replay from one checkpoint would ask of the ledger, judged from the dry run's
intents and the ledger's own answers to them. Pure: no Kafka, no graph, no clock.

Each intent the replay made was answered by the decision core (``decide``) on the key's
state as the ledger holds it, at the time the replay is planned for, so a finding is the
ledger's answer, not a guess:

- ``safe``: a key the ledger holds with the same arguments: it answers the original
  receipt, nothing is done again;
- ``new_effect``: a key the ledger does not hold: the replay would make a new effect;
- ``rejected``: the same key with other arguments (a conflict), an expired key, or an
  approval that does not verify: the replay's step would get a rejected receipt;
- ``stale_approval``: the approval the replay carries has expired at that time, or is
  bound to other arguments (or another policy revision): rejected;
- ``held``: held as an incompatible version while the key's effect is in flight;
- ``orphan``: the thread recorded an intent in a step the replay re-runs (its checkpoint
  descends from the one replayed: history.py's ``Lineage``), the replay ran to its end
  without asking for its key, and the ledger says the key's effect may exist (succeeded,
  or in flight): that effect stays, and what the step asks instead (often a
  ``new_effect``) is a second effect. A key the ledger rejected or whose effect failed
  made none: no finding;
- ``error``: the graph raised while replaying;
- ``waiting``: the replay stopped at an ``interrupt()`` it had no answer for: what comes
  after it was not planned. A recorded key (with an effect) the replay re-runs and had
  not asked when it stopped is not reached: reported under the ``waiting`` (or the
  ``error``) that stopped it, never as an orphan.

A key asked twice keeps its worst answer. A checkpoint's verdict is its worst finding, in
the order of ``VERDICTS``; a checkpoint whose replay asks nothing is ``safe``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ledger_stream.domain import events as ev
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.upgrade.verdict import Asked


class Kind(StrEnum):
    SAFE = "safe"
    NEW_EFFECT = "new_effect"
    WAITING = "waiting"
    HELD = "held"
    STALE_APPROVAL = "stale_approval"
    REJECTED = "rejected"
    ORPHAN = "orphan"
    ERROR = "error"


# Worst last: a checkpoint's verdict, and a key asked twice, keep the worst.
VERDICTS = (Kind.SAFE, Kind.NEW_EFFECT, Kind.WAITING, Kind.HELD, Kind.STALE_APPROVAL,
            Kind.REJECTED, Kind.ORPHAN, Kind.ERROR)
# Approval problems (approval.py) that time or a changed argument explain.
STALE = ("approval expired", "approval payload hash differs",
         "approval policy revision differs")


def _unreached(stop: Kind | None, intent: ev.Intent, ran: set[str]) -> Kind | None:
    """The stop's kind when the replay stopped before the node that recorded ``intent``."""
    return stop if stop is not None and intent.workflow.node not in ran else None


def effect_may_exist(state: KeyState) -> bool:
    """Whether the ledger's state of a key says its effect may exist: succeeded (sealed
    so, too), still in flight, or failed with an attempt whose outcome nobody knew (the
    core counts such an attempt as possibly applied). Absent, rejected before it was
    held, failed with every outcome known: none."""
    failed = state.phase is Phase.FAILED or (state.phase is Phase.EXPIRED
                                             and state.sealed_outcome == Phase.FAILED.value)
    return (state.phase is Phase.SUCCEEDED or state.phase.in_flight
            or (state.phase is Phase.EXPIRED
                and state.sealed_outcome == Phase.SUCCEEDED.value)
            or (failed and state.unknown_attempts > 0))


@dataclass(frozen=True)
class Step:
    """One finding of a replay: ``key`` the operation key when it is about one."""

    kind: Kind
    key: str = ""
    node: str = ""
    detail: str = ""


@dataclass(frozen=True)
class CheckpointPlan:
    """A replay from one checkpoint of the thread (``step`` and ``source`` from its
    metadata; ``next`` the nodes the replay starts with)."""

    checkpoint_id: str
    step: int
    source: str
    next: tuple[str, ...]
    findings: tuple[Step, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> Kind:
        return max((f.kind for f in self.findings), key=VERDICTS.index, default=Kind.SAFE)


def judge_replay(checkpoint_id: str, step: int, source: str, next_nodes: Sequence[str],
                 asked: Sequence[Asked], waiting_in: Sequence[str] = (),
                 error: str = "", rerun: Sequence[tuple[ev.Intent, KeyState]] = ()
                 ) -> CheckpointPlan:
    """The plan of a replay from one checkpoint: ``asked`` the dry run's intents with the
    ledger's answers, in order; ``waiting_in`` where it stopped for an answer; ``error``
    what the graph raised, if it did; ``rerun`` the intents the thread recorded in the
    steps the replay re-runs, each with its key's state as the ledger holds it."""
    worst: dict[str, Step] = {}
    for one in asked:
        found = _answer(one)
        held = worst.get(one.intent.key)
        if held is None or VERDICTS.index(found.kind) > VERDICTS.index(held.kind):
            worst[one.intent.key] = found
    findings = list(worst.values())
    orphans: dict[str, ev.Intent] = {}
    for intent, state in rerun:
        if intent.key not in worst and effect_may_exist(state):
            orphans.setdefault(intent.key, intent)
    # A key recorded in a node the replay ran (it asked there) was passed, not left
    # unreached by the stop (a hostile review: such a key was hidden as "not reached").
    ran = {one.intent.workflow.node for one in asked}
    stop = (Kind.WAITING if waiting_in else Kind.ERROR if error else None)
    stopped = (f"the replay stopped in {', '.join(waiting_in)}" if waiting_in
               else "the graph raised")
    findings += [Step(_unreached(stop, intent, ran) or Kind.ORPHAN, key=key,
                      node=intent.workflow.node, detail=(
        f"the thread recorded this key ({intent.workflow.graph}@{intent.workflow.version}, "
        f"args {intent.args_hash[:12]}, {intent.origin.value} from checkpoint "
        f"{intent.workflow.checkpoint_id}) in a step this replay re-runs, "
        + (f"and {stopped} before asking it: not reached" if _unreached(stop, intent, ran)
           else "and the replay does not ask for it: its effect stays, a key asked "
           "instead is another")))
        for key, intent in sorted(orphans.items())]
    findings += [Step(Kind.WAITING, node=node, detail="stopped at an interrupt with no "
                      "answer (--resume gives one): what follows was not planned")
                 for node in waiting_in]
    if error:
        findings.append(Step(Kind.ERROR, detail=error))
    return CheckpointPlan(checkpoint_id, step, source, tuple(next_nodes), tuple(findings))


def _answer(one: Asked) -> Step:
    intent, state, receipt = one.intent, one.state, one.receipt
    where = dict(key=intent.key, node=intent.workflow.node)
    asks = intent.args_hash[:12]
    if receipt.status is ev.ReceiptStatus.REJECTED:
        if receipt.reason is ev.Reason.CONFLICT:
            return Step(Kind.REJECTED, **where, detail=(
                f"other arguments: the ledger holds {state.args_hash[:12]} "
                f"({state.phase.value}), the replay asks {asks}"))
        if receipt.reason is ev.Reason.APPROVAL and receipt.detail.startswith(STALE):
            return Step(Kind.STALE_APPROVAL, **where, detail=receipt.detail)
        return Step(Kind.REJECTED, **where, detail=f"the ledger would reject it: "
                    f"{receipt.reason.value}" + (f" ({receipt.detail})" if receipt.detail
                                                 else ""))
    if receipt.status is ev.ReceiptStatus.HELD and receipt.reason is ev.Reason.VERSION:
        return Step(Kind.HELD, **where, detail=(
            f"held: {state.graph}@{state.version} is {state.phase.value}"))
    if state.phase is Phase.ABSENT:
        return Step(Kind.NEW_EFFECT, **where, detail=(
            f"a key the ledger does not hold: args {asks} would be dispatched"))
    status = receipt.status.value
    phase = "" if state.phase.value == status else f", key {state.phase.value}"
    return Step(Kind.SAFE, **where, detail=(
        f"the same args {asks}: the original receipt ({status}{phase})"))


def exit_status(plans: Sequence[CheckpointPlan]) -> int:
    """0 when a replay from every checkpoint is safe (each key it asks for is answered
    with its original receipt, or it asks none); 1 otherwise (a new effect, a rejection,
    a stale approval, a hold, an orphan, an error, or an interrupt with no answer)."""
    return 0 if all(p.verdict is Kind.SAFE for p in plans) else 1
