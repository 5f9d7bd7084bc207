"""The connector's pre-grant path (docs/connectors.md, 'The pre-granted first attempt'):
the steps of ``ConnectorCore`` for a live Dispatch that carries ``lease_until_ms``.

The processor grants attempt 1 in the Dispatch itself, to whichever connector *fences* the
record first: commits its partition's offset past it, in its own group generation (the
driver asks the commit asynchronously and reports its answer with ``fenced``). The group
coordinator takes that commit only from a member of its current generation, and the
partition's next owner starts reading after it: at most one connector fences a record.
Rules kept here:

- only a live record (not backlog) whose lease covers the call takes this path; the others
  claim plainly and wait for the answer;
- the fence is asked only while the partition's commit frontier is the record's own offset
  (committing ``o + 1`` commits everything before it too), the partition is assigned, and
  the connector neither stopped nor closing; until then the job waits for the frontier, as
  long as the lease still covers the call, then claims plainly;
- a failed fence never calls: it is asked again after a short delay while the partition
  stays assigned and the lease still covers a call (then the job claims plainly: a fence
  would only lead to ``not_called``), and dropped on revocation;
- once fenced, the record counts as handled for the frontier; the fenced claim is produced
  and the call starts only once that claim is recorded and the lease still covers it
  (else, or after a revocation or shutdown, ``not_called``); the processor's answer to the
  claim is never awaited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_stream.connector.commands import Command, Commit, Fence, Produce
from ledger_stream.connector.jobs import DispatchJob, Job, Stage
from ledger_stream.domain import events as ev

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_stream.connector.options import ConnectorOptions
    from ledger_stream.connector.progress import PartitionProgress

FENCE_RETRY_MS = 20  # a failed fence is asked again after this (the commit is idempotent)


class PregrantPath:
    """Mixed into ``ConnectorCore``: the state and steps it shares are declared here."""

    if TYPE_CHECKING:
        opts: ConnectorOptions
        instance: str
        stopped: str
        closing: bool
        _progress: dict[int, PartitionProgress]
        _busy: dict[str, Job]
        _jobs: dict[int, Job]
        _wake_exact: bool
        _new_id: Callable[[], str]

        def _wait(self, job: Job, wake_at_ms: int) -> None: ...
        def _claim(self, job: DispatchJob, now_ms: int) -> list[Command]: ...
        def _call(self, job: DispatchJob, start_by_ms: int, now_ms: int) -> list[Command]: ...
        def _give_up(self, job: Job, now_ms: int) -> list[Command]: ...
        def _withdraw(self, job: DispatchJob, why: str, now_ms: int) -> list[Command]: ...
        def _finish_offset(self, partition: int, offset: int, now_ms: int
                           ) -> list[Command]: ...

    # (partition, offset) -> the job waiting for the frontier to reach its record
    _fence_waits: dict[tuple[int, int], DispatchJob]

    def fenced(self, job_id: int, ok: bool, now_ms: int) -> list[Command]:
        """The driver ran a ``Fence``: ``ok`` when the commit was accepted."""
        job = self._jobs.get(job_id)
        if not isinstance(job, DispatchJob) or job.stage is not Stage.FENCING:
            return []
        if not ok:
            if job.abandoned or self.closing or self.stopped \
                    or job.partition not in self._progress:
                job.abandoned = True  # revoked: not handled, nothing committed
                return self._give_up(job, now_ms)
            if not self._covers(job, now_ms):  # no fenced call could start any more
                job.pregrant = False
                return self._claim(job, now_ms)
            job.fence_failed = True  # a transient coordinator error: fence again soon
            self._wait(job, now_ms + FENCE_RETRY_MS)
            return []
        job.fenced = True
        # The fence committed offset + 1 already; records after it handled earlier move the
        # commit further.
        out = [c for c in self._finish_offset(job.partition, job.offset, now_ms)
               if not (isinstance(c, Commit) and c.offset <= job.offset + 1)]
        if self.stopped:  # an acknowledgement failed: nothing new goes out
            job.abandoned = True
            return out + self._give_up(job, now_ms)
        job.claim_id, job.claimed_at_ms = self._new_id(), now_ms
        job.stage, job.called = Stage.CLAIMING, False
        d = job.d
        claim = ev.AttemptClaim(self._new_id(), d.key, d.attempt, job.claim_id, self.instance,
                                self.opts.lease_ms, now_ms, fenced=True)
        return [*out, Produce(job.id, claim)]

    def _needed_ms(self) -> float:
        """What a lease must still cover when the call starts: the call and its report (the
        ``needed_ms`` a Grant is checked against)."""
        return (self.opts.call_timeout_s + self.opts.record_margin_s) * 1000

    def _covers(self, job: DispatchJob, now_ms: int) -> bool:
        spare_ms = job.d.lease_until_ms - now_ms - self.opts.clock_skew_ms
        return spare_ms >= self._needed_ms()

    def _last_start_ms(self, job: DispatchJob) -> int:
        """The latest time (own clock) a call under the dispatch's lease may start."""
        return job.d.lease_until_ms - self.opts.clock_skew_ms - int(self._needed_ms())

    def _fence_or_wait(self, job: DispatchJob, now_ms: int) -> list[Command]:
        """A pre-granted job woke: fence its record, wait for the frontier, or (its lease no
        longer covers a call, whether or not a fence failed) claim plainly. Never while
        stopped or closing: nothing wakes after a failed acknowledgement, and shutdown drops
        waiting jobs."""
        if not self._covers(job, now_ms):
            job.pregrant = False
            self._fence_waits.pop((job.partition, job.offset), None)
            return self._claim(job, now_ms)
        progress = self._progress.get(job.partition)
        if progress is not None and progress.frontier() == job.offset:
            self._fence_waits.pop((job.partition, job.offset), None)
            job.stage = Stage.FENCING
            return [Fence(job.id, job.partition, job.offset + 1)]
        # Woken again when the frontier reaches the record (``_frontier_moved``), or once
        # the lease stops covering a call; after a failed fence, soon.
        self._fence_waits[(job.partition, job.offset)] = job
        self._wait(job, now_ms + FENCE_RETRY_MS if job.fence_failed
                   else self._last_start_ms(job) + 1)
        return []

    def _frontier_moved(self, partition: int, frontier: int, now_ms: int) -> list[Command]:
        """The partition's commit point moved: ``frontier`` is its first record read and
        not handled (``PartitionProgress.frontier``), the job waiting there fences. Not the
        offset committed: past a transaction's commit marker (the exactly-once processor
        writes one after each transaction), the next record's offset is one further."""
        job = self._fence_waits.pop((partition, frontier), None)
        if job is None or not job.pregrant or job.stage is not Stage.WAITING \
                or self._busy.get(job.key) is not job:
            return []
        self._wake_exact = False  # it was waiting: the next wake-up is looked for again
        return self._fence_or_wait(job, now_ms)

    def _fenced_claim_recorded(self, job: DispatchJob, now_ms: int) -> list[Command]:
        """The fenced claim is in the log: call under the dispatch's lease, if it covers."""
        if job.abandoned or self.closing:
            return self._withdraw(job, "fenced claim withdrawn: partition revoked or stopping",
                                  now_ms)
        if not self._covers(job, now_ms):
            spare_ms = job.d.lease_until_ms - now_ms - self.opts.clock_skew_ms
            return self._withdraw(job, f"pre-grant had {spare_ms} ms of lease left, "
                                  f"{self._needed_ms():.0f} ms needed", now_ms)
        return self._call(job, self._last_start_ms(job), now_ms)
