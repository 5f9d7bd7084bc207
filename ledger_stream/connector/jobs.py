"""One unit of connector work and the stages it goes through.

A ``DispatchJob`` applies one Dispatch: wait for ``not_before``, claim, wait for the answer
naming its claim id (Grant: call; Held: claim again after the lease; Reconcile or Done:
drop), call, report. A live pre-granted Dispatch is fenced instead (its offset committed,
``pregrant.py``), then claimed with ``fenced`` and called once that claim is recorded,
without waiting for the answer. A ``ReconcileJob`` answers one Reconcile: look the key up and report
what the target holds; it never resends.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from ledger_stream.domain import events as ev


class Stage(Enum):
    WAITING = auto()  # until wake_at_ms: not_before, a Held lease, a lookup retry, a fence
    FENCING = auto()  # the pre-grant's fence (an offset commit) waits for its answer
    CLAIMING = auto()  # claim produced, acknowledgement pending
    ANSWER = auto()  # claim recorded, waiting for the answer naming its claim id
    CALLING = auto()  # the target call is running
    LOOKING = auto()  # the lookup is running
    REPORTING = auto()  # outcome / result produced, acknowledgement pending
    WITHDRAWING = auto()  # giving a claim up: its not_called outcome is being produced
    DONE = auto()


# Stages that end on an event of this process (a finished call or lookup, a delivery
# report), which the runtime's loop only sees between two polls of its feed.
LOCAL_STAGES = frozenset({Stage.FENCING, Stage.CLAIMING, Stage.CALLING, Stage.LOOKING,
                          Stage.REPORTING, Stage.WITHDRAWING})


@dataclass(eq=False)
class Job:
    id: int
    partition: int
    offset: int
    key: str
    stage: Stage = Stage.WAITING
    wake_at_ms: int = 0
    # The partition was revoked (or the instance is stopping): finish what is on the wire,
    # start nothing new, and never commit this record's offset.
    abandoned: bool = False
    not_called: bool = False  # its report says not_called: its dispatch stays unhandled


@dataclass(eq=False)
class DispatchJob(Job):
    dispatch: ev.Dispatch | None = None
    claim_id: str = ""
    claimed_at_ms: int = 0
    fast: bool = False  # calls without waiting for the grant (deduplicating target)
    warned: bool = False  # the "no answer yet" line was logged for this claim
    early_answer: object = None  # the answer, read before the claim's acknowledgement
    called: bool = False  # this claim's call went out (a fast-path call may precede its answer)
    pregrant: bool = False  # on the pre-grant path: a live dispatch with lease_until_ms > 0
    fence_failed: bool = False  # a fence failed: asked again soon, while the lease covers a call
    fenced: bool = False  # the fence held: the claim is fenced, its answer never awaited

    @property
    def d(self) -> ev.Dispatch:
        assert self.dispatch is not None
        return self.dispatch

    def newly_slow(self, now_ms: int, warn_ms: int) -> bool:
        """True once per claim: when its answer first takes longer than ``warn_ms``."""
        if self.warned or now_ms - self.claimed_at_ms <= warn_ms:
            return False
        self.warned = True
        return True


@dataclass(eq=False)
class ReconcileJob(Job):
    reconcile: ev.Reconcile | None = None
    give_up_at_ms: int = 0  # the end of the lookup patience
    retry_delay_ms: int = 200

    @property
    def r(self) -> ev.Reconcile:
        assert self.reconcile is not None
        return self.reconcile


def marker(job: Job) -> str:
    """What says a job was handled already: its dispatch id, or its reconcile's attempt."""
    if isinstance(job, DispatchJob):
        return job.d.dispatch_id
    assert isinstance(job, ReconcileJob)
    r = job.r
    return f"reconcile:{r.key}:{r.attempt}:{r.claim_id}"
