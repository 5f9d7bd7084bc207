"""The connector's answer to a Reconcile (docs/design.md, 'Reconciliation by lookup'): the
steps of ``ConnectorCore`` for a ``ReconcileJob``. The job looks the key up at the target
(after its consistency window) and reports what the target holds; a lookup that fails is
retried, backing off, within the lookup patience; it never resends the effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_stream.connector.commands import Command, LookupAnswer, Produce
from ledger_stream.connector.jobs import Job, ReconcileJob, Stage
from ledger_stream.domain import events as ev

if TYPE_CHECKING:
    from collections.abc import Callable


class ReconcileSteps:
    """Mixed into ``ConnectorCore``: the state and steps it shares are declared here."""

    if TYPE_CHECKING:
        deduplicates: bool
        queryable: bool
        closing: bool
        _jobs: dict[int, Job]
        _new_id: Callable[[], str]

        def _wait(self, job: Job, wake_at_ms: int) -> None: ...
        def _give_up(self, job: Job, now_ms: int) -> list[Command]: ...

    def looked_up(self, job_id: int, answer: LookupAnswer, now_ms: int) -> list[Command]:
        job = self._jobs[job_id]
        assert isinstance(job, ReconcileJob) and job.stage is Stage.LOOKING
        if answer.unavailable:
            if job.abandoned or self.closing:
                return self._give_up(job, now_ms)  # the partition's next owner asks again
            if self.queryable and now_ms + job.retry_delay_ms <= job.give_up_at_ms:
                self._wait(job, now_ms + job.retry_delay_ms)
                job.retry_delay_ms = min(job.retry_delay_ms * 2, 5_000)
                return []
            return self._result(job, ev.ReconcileStatus.UNQUERYABLE, "", answer.unavailable,
                                now_ms)
        if answer.external_id:
            return self._result(job, ev.ReconcileStatus.FOUND, answer.external_id, "", now_ms)
        return self._result(job, ev.ReconcileStatus.NOT_FOUND, "", "", now_ms)

    def _result(self, job: ReconcileJob, status: ev.ReconcileStatus, external_id: str,
                error: str, now_ms: int) -> list[Command]:
        r = job.r
        job.stage = Stage.REPORTING
        result = ev.ReconcileResult(self._new_id(), r.key, r.attempt, r.claim_id, status,
                                    self.deduplicates, now_ms, external_id, error[:200])
        return [Produce(job.id, result)]

