"""The connector's side of the protocol (docs/design.md, 'The connector protocol') as a
state machine without I/O.

The driver feeds it what happened (a record read, an acknowledgement, a call's or lookup's
result, a revocation, the time) and executes the commands it returns. Guarantees:

- the target is called only on a Grant naming this job's claim id, with enough lease left
  to cover the call, the outcome report and the clock skew; or for a live pre-granted
  dispatch this instance fenced, once its fenced claim is recorded, under the same check
  (``pregrant.py``); or, on the fast path, for a live dispatch at a target that
  deduplicates by key;
- a claim that was recorded is never abandoned in silence: it ends in a call and its
  outcome, or in a ``not_called`` outcome (late grant, revocation, shutdown);
- waiting for an answer never mints a new claim id (processor lag costs no attempt);
- a record's offset is committed only once everything it caused is acknowledged, never
  after a failed acknowledgement (the driver then stops), never after a revocation; a
  fenced record's is committed by its fence, before its claim (a crash then leaves the
  record unclaimed: the processor's stall timer sends a plain copy);
- after a failed acknowledgement nothing new goes out: no call (even on a grant already
  read), no claim, no lookup;
- one key at a time, many keys at once, at most ``max_in_flight`` jobs.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable

from ledger_stream.connector.commands import (
    Call,
    Command,
    Commit,
    Lookup,
    Produce,
    Record,
    Stop,
)
from ledger_stream.connector.jobs import (
    LOCAL_STAGES,
    DispatchJob,
    Job,
    ReconcileJob,
    Stage,
    marker,
)
from ledger_stream.connector.lookups import ReconcileSteps
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.connector.pregrant import PregrantPath
from ledger_stream.connector.progress import PartitionProgress, Remembered
from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain import events as ev
from ledger_stream.logs import log_fields
from ledger_stream.serde import AvroCodec

logger = logging.getLogger(__name__)

ANSWERS = (ev.Grant, ev.Held, ev.Reconcile, ev.Done)
_NEVER = float("inf")


def writes_fenced(codec: AvroCodec) -> bool:
    """Whether ``codec`` writes AttemptClaim with ``fenced``: an older release's schema
    (``LEDGER_WRITE_SCHEMAS``) drops it, the processor reads a fenced claim as plain and
    holds it, and a call made on it would be one the ledger never granted."""
    return "fenced" in codec.schemas.writer("AttemptClaim").fields


class ConnectorCore(PregrantPath, ReconcileSteps):
    def __init__(self, target: str, deduplicates: bool, queryable: bool,
                 options: ConnectorOptions, new_id: Callable[[], str],
                 pregrant: bool = True) -> None:
        """``pregrant``: take a live pre-granted Dispatch's path (False: claim it plainly, as
        a connector must whose AttemptClaim schema cannot say ``fenced``)."""
        options.check(deduplicates)
        self.pregrant = pregrant
        self.target, self.deduplicates, self.queryable = target, deduplicates, queryable
        self.opts = options
        self.warn_ms = int(options.answer_warn_s * 1000)  # a claim's answer counts as slow
        self.instance = options.instance_id
        self._new_id = new_id
        self._progress: dict[int, PartitionProgress] = {}
        self._pending: dict[str, deque[Job]] = {}  # per key, in partition order
        self._ready: deque[str] = deque()  # keys whose next job may start
        self._busy: dict[str, Job] = {}  # the running job of each key
        self._jobs: dict[int, Job] = {}
        self._waiting: dict[str, DispatchJob] = {}  # claim id -> job awaiting its answer
        self._fence_waits = {}
        self._handled = Remembered()
        self._next_job = 0
        # Lower bounds of the next WAITING job's wake-up and of the next slow-answer warning:
        # ``tick`` and ``next_wake_ms`` look at every running job only once one may be due
        # (a scan of 256 jobs on each pass of the driver's loop cost ~20 µs per dispatch).
        self._wake_lb: float = _NEVER
        self._warn_lb: float = _NEVER
        self._wake_exact = True  # ``_wake_lb`` is the next wake-up itself, not only a bound
        self.stopped = ""  # the reason, once a Stop was returned
        self.closing = False  # shutdown() was called: nothing new starts or waits for Kafka

    # --- what the driver reports ----------------------------------------------------------

    def assigned(self, partition: int) -> None:
        self._progress[partition] = PartitionProgress()

    def revoked(self, partitions: list[int], now_ms: int) -> list[Command]:
        """The partitions are gone: drop their queued work, give up waiting claims."""
        gone = set(partitions)
        for p in gone:
            self._progress.pop(p, None)
        self._fence_waits = {k: j for k, j in self._fence_waits.items() if k[0] not in gone}
        for key in list(self._pending):
            kept = deque(j for j in self._pending[key] if j.partition not in gone)
            if kept:
                self._pending[key] = kept
            else:
                del self._pending[key]
        return self._abandon([j for j in self._busy.values() if j.partition in gone], now_ms)

    def shutdown(self, now_ms: int) -> list[Command]:
        """Stop taking work: give up the claims not called yet; calls and lookups on the
        wire finish, report and are committed as usual. A fast-path call then ends once its
        outcome is recorded (the answer it would wait for is not read any more), uncommitted,
        and a lookup that fails is not retried."""
        self.closing = True
        self._pending.clear()
        self._ready.clear()
        waiting = (Stage.WAITING, Stage.FENCING, Stage.CLAIMING, Stage.ANSWER)
        return self._abandon([j for j in self._busy.values() if j.stage in waiting], now_ms)

    def record(self, rec: Record, now_ms: int) -> list[Command]:
        """A record read from ``ledger.dispatch``."""
        progress = self._progress.get(rec.partition)
        if progress is None or not progress.read(rec.offset):
            return []  # read after its partition was revoked, or read twice
        event = rec.event
        out: list[Command] = []
        if isinstance(event, ANSWERS) and event.claim_id in self._waiting:
            waiter = self._waiting.pop(event.claim_id)
            if waiter.stage is Stage.ANSWER:
                out += self._answer(waiter, event, now_ms)
            else:  # read before the claim's acknowledgement, or during a fast-path call
                waiter.early_answer = event
        job = self._job_for(rec, now_ms)
        if job is None:
            out += self._finish_offset(rec.partition, rec.offset, now_ms)
        else:
            self._enqueue(job)
        return out + self._start(now_ms)

    def produced(self, job_id: int, ok: bool, now_ms: int, error: str = "") -> list[Command]:
        job = self._jobs.get(job_id)
        if not ok:
            self.stopped = f"an acknowledgement failed: {error}"
            return [Stop(self.stopped)]
        if job is None:
            return []
        if job.stage is Stage.CLAIMING:
            assert isinstance(job, DispatchJob)
            if job.fenced:
                return self._fenced_claim_recorded(job, now_ms)
            return self._claim_recorded(job, now_ms)
        if isinstance(job, DispatchJob) and job.stage is Stage.REPORTING and job.fast:
            return self._await_answer(job, now_ms)  # a fast-path call still needs its answer
        return self._finish(job, now_ms, remember=not job.not_called)

    def called(self, job_id: int, status: ev.OutcomeStatus, external_id: str, error: str,
               now_ms: int) -> list[Command]:
        job = self._jobs[job_id]
        assert isinstance(job, DispatchJob) and job.stage is Stage.CALLING
        if status is not ev.OutcomeStatus.SUCCEEDED:
            logger.warning("attempt outcome", extra=log_fields(
                key=job.key, attempt=job.d.attempt, claim_id=job.claim_id,
                outcome=status.value, error=error))
        return self._report(job, status, external_id, error, now_ms)

    def tick(self, now_ms: int) -> list[Command]:
        """Time passed: wake the jobs whose wait is over."""
        if now_ms < self._wake_lb and now_ms < self._warn_lb:
            return []  # nothing can be due yet
        out: list[Command] = []
        warn_lb = _NEVER
        for job in list(self._busy.values()):
            if job.stage is Stage.WAITING and job.wake_at_ms <= now_ms:
                out += self._wake(job, now_ms)
            elif job.stage is Stage.ANSWER and isinstance(job, DispatchJob):
                if job.newly_slow(now_ms, self.warn_ms):
                    logger.warning("claim not answered yet; still waiting for the same claim",
                                   extra=log_fields(key=job.key, attempt=job.d.attempt,
                                                    claim_id=job.claim_id))
                if not job.warned:
                    warn_lb = min(warn_lb, job.claimed_at_ms + self.warn_ms)
        self._warn_lb = warn_lb
        self._wake_exact = False  # jobs woken: looked for again below
        self.next_wake_ms()
        return out

    def next_wake_ms(self) -> int | None:
        if not self._wake_exact:
            waits = [j.wake_at_ms for j in self._busy.values() if j.stage is Stage.WAITING]
            self._wake_lb, self._wake_exact = min(waits, default=_NEVER), True
        return None if self._wake_lb == _NEVER else int(self._wake_lb)

    def idle(self) -> bool:
        return not self._busy and not any(self._pending.values())

    def awaits_local(self) -> bool:
        """Whether a running job waits for something of this process (a call, a lookup, a
        delivery report), not for a record from Kafka or a time."""
        return any(j.stage in LOCAL_STAGES for j in self._busy.values())

    def in_flight(self) -> int:
        """Jobs started and not finished (a gauge; and a leak would show here)."""
        return len(self._jobs)

    # --- scheduling -----------------------------------------------------------------------

    def _job_for(self, rec: Record, now_ms: int) -> Job | None:
        event = rec.event
        if getattr(event, "target", None) != self.target:
            return None  # another target's work, an answer, or undecodable
        self._next_job += 1
        if isinstance(event, ev.Dispatch):
            age_ms = now_ms - rec.timestamp_ms
            pregrant = self.pregrant and event.lease_until_ms > 0 and not rec.backlog
            fast = self.opts.fast_path and not rec.backlog and not pregrant \
                and age_ms <= self.opts.fast_path_max_age_s * 1000
            return DispatchJob(self._next_job, rec.partition, rec.offset, event.key,
                               wake_at_ms=event.not_before_ms, dispatch=event, fast=fast,
                               pregrant=pregrant)
        if isinstance(event, ev.Reconcile):
            return ReconcileJob(self._next_job, rec.partition, rec.offset, event.key,
                                reconcile=event)
        return None

    def _enqueue(self, job: Job) -> None:
        queue = self._pending.setdefault(job.key, deque())
        queue.append(job)
        if len(queue) == 1 and job.key not in self._busy:
            self._ready.append(job.key)

    def _start(self, now_ms: int) -> list[Command]:
        out: list[Command] = []
        while (self._ready and len(self._busy) < self.opts.max_in_flight
               and not self.stopped and not self.closing):
            key = self._ready.popleft()
            queue = self._pending.get(key)
            if not queue or key in self._busy:
                continue
            job = queue.popleft()
            if not queue:
                del self._pending[key]
            if self._already_handled(job):
                out += self._finish_offset(job.partition, job.offset, now_ms)
                self._release(key)
                continue
            self._busy[key] = job
            self._jobs[job.id] = job
            out += self._begin(job, now_ms)
        return out

    def _already_handled(self, job: Job) -> bool:
        return marker(job) in self._handled

    def _release(self, key: str) -> None:
        self._busy.pop(key, None)
        if self._pending.get(key):
            self._ready.append(key)

    def _begin(self, job: Job, now_ms: int) -> list[Command]:
        if isinstance(job, ReconcileJob):
            job.give_up_at_ms = now_ms + int(self.opts.lookup_patience_s * 1000)
            job.wake_at_ms = now_ms + int(self.opts.lookup_delay_s * 1000)
        if job.wake_at_ms <= now_ms:
            job.stage = Stage.WAITING
            return self._wake(job, now_ms)
        self._wait(job, job.wake_at_ms)
        return []

    def _wait(self, job: Job, wake_at_ms: int) -> None:
        """``job`` waits (stage WAITING) until ``wake_at_ms``: ``tick`` wakes it."""
        job.stage, job.wake_at_ms = Stage.WAITING, wake_at_ms
        self._wake_lb = min(self._wake_lb, wake_at_ms)

    def _wake(self, job: Job, now_ms: int) -> list[Command]:
        if self.stopped:  # an acknowledgement failed: nothing asked now could be recorded
            return []
        if isinstance(job, ReconcileJob):
            job.stage = Stage.LOOKING
            return [Lookup(job.id, job.key, self.opts.call_timeout_s)]
        assert isinstance(job, DispatchJob)
        if job.pregrant:
            return self._fence_or_wait(job, now_ms)
        return self._claim(job, now_ms)

    def _finish(self, job: Job, now_ms: int, remember: bool = True) -> list[Command]:
        job.stage = Stage.DONE
        self._jobs.pop(job.id, None)
        if job.abandoned:
            # Not "handled": if the partition comes back, its record is read and claimed
            # again, and the processor answers that claim as the key is now.
            out: list[Command] = []
        else:
            if remember:
                self._handled.add(marker(job))
            out = self._finish_offset(job.partition, job.offset, now_ms)
        if self._busy.get(job.key) is job:
            self._release(job.key)
        return out + self._start(now_ms)

    def _finish_offset(self, partition: int, offset: int, now_ms: int) -> list[Command]:
        progress = self._progress.get(partition)
        commit_to = progress.finish(offset) if progress is not None else None
        if commit_to is None or progress is None or self.stopped:
            return []
        return [Commit(partition, commit_to),
                *self._frontier_moved(partition, progress.frontier(), now_ms)]

    def _abandon(self, jobs: list[Job], now_ms: int) -> list[Command]:
        out: list[Command] = []
        for job in jobs:
            job.abandoned = True
            if job.stage is Stage.WAITING:
                out += self._give_up(job, now_ms)
            elif job.stage is Stage.ANSWER:
                assert isinstance(job, DispatchJob)
                del self._waiting[job.claim_id]
                if job.called:
                    out += self._finish(job, now_ms)  # its outcome is recorded already
                else:
                    out += self._withdraw(job, "claim withdrawn: partition revoked or "
                                          "stopping", now_ms)
            # CLAIMING withdraws once recorded; CALLING, LOOKING and REPORTING finish.
        return out

    def _give_up(self, job: Job, now_ms: int) -> list[Command]:
        """Drop a job that has nothing on the wire (not claimed yet, or between claims)."""
        if job.stage is Stage.WAITING:
            self._wake_exact = False  # it may have been the next to wake
            self._fence_waits.pop((job.partition, job.offset), None)
        job.stage = Stage.DONE
        self._jobs.pop(job.id, None)
        if self._busy.get(job.key) is job:
            self._release(job.key)
        return self._start(now_ms)

    # --- dispatches -----------------------------------------------------------------------

    def _claim(self, job: DispatchJob, now_ms: int) -> list[Command]:
        d = job.d
        job.claim_id, job.claimed_at_ms, job.warned = self._new_id(), now_ms, False
        job.stage, job.early_answer, job.called = Stage.CLAIMING, None, False
        self._waiting[job.claim_id] = job
        claim = ev.AttemptClaim(self._new_id(), d.key, d.attempt, job.claim_id, self.instance,
                                self.opts.lease_ms, now_ms)
        return [Produce(job.id, claim)]

    def _claim_recorded(self, job: DispatchJob, now_ms: int) -> list[Command]:
        if job.abandoned:
            self._waiting.pop(job.claim_id, None)
            return self._withdraw(job, "claim withdrawn: partition revoked or stopping",
                                  now_ms)
        if job.fast and job.early_answer is None:
            return self._call(job, 0, now_ms)
        # An answer came before the claim's acknowledgement (a Done, a Reconcile, a Grant):
        # it decides, as for any claim; the fast path would call past it.
        job.fast = False
        return self._await_answer(job, now_ms)

    def _await_answer(self, job: DispatchJob, now_ms: int) -> list[Command]:
        job.stage = Stage.ANSWER
        if not job.warned:  # ``tick`` warns once the answer is slow
            self._warn_lb = min(self._warn_lb, job.claimed_at_ms + self.warn_ms)
        if job.abandoned or self.closing:
            # A fast-path job whose partition went while it was calling, or that finished
            # its call while the connector stops: no answer is read for it any more, and
            # one read already (a Held) must not make it claim again. Not "handled": the
            # partition's next owner reads the dispatch again and claims it, and the
            # processor answers that claim as the key is then.
            job.abandoned = True
            self._waiting.pop(job.claim_id, None)
            return self._finish(job, now_ms)
        if job.early_answer is not None:
            return self._answer(job, job.early_answer, now_ms)
        return []

    def _answer(self, job: DispatchJob, answer: object, now_ms: int) -> list[Command]:
        if job.called:
            # A fast-path call already went out: a Grant means it was the holder's call.
            # Held: someone else holds the attempt (or its backoff had not ended): claim
            # again after the lease, now waiting for the grant; the processor decides.
            if isinstance(answer, ev.Held):
                job.fast = False
                return self._wait_after(job, answer, now_ms)
            # Done: the call went out without the ledger's leave; a copy sent once the
            # attempt is open is claimed (the target deduplicates: the fast path needs it).
            return self._finish(job, now_ms, remember=not isinstance(answer, ev.Done))
        if isinstance(answer, ev.Grant):
            spare_ms = answer.lease_until_ms - now_ms - self.opts.clock_skew_ms
            needed_ms = (self.opts.call_timeout_s + self.opts.record_margin_s) * 1000
            if spare_ms < needed_ms:
                return self._withdraw(job, f"grant came with {spare_ms} ms of lease left, "
                                      f"{needed_ms:.0f} ms needed", now_ms)
            return self._call(job, answer.lease_until_ms - self.opts.clock_skew_ms
                              - int(needed_ms), now_ms)
        if isinstance(answer, ev.Held):
            return self._wait_after(job, answer, now_ms)
        # Reconcile or Done: not ours to apply. Done says the attempt was not open when the
        # claim was decided, which is no answer for later: the processor sends the same
        # dispatch again only when the attempt is open (its stall timer, or at least once,
        # an intent decided again after the claims its first copy drew), so a copy read
        # after a Done is claimed again and the processor answers it as the key is then.
        return self._finish(job, now_ms, remember=not isinstance(answer, ev.Done))

    def _wait_after(self, job: DispatchJob, held: ev.Held, now_ms: int) -> list[Command]:
        """Someone holds the attempt (or its backoff runs): claim again, with a new claim id,
        once the broker's clock has surely passed ``lease_until`` too; without the skew
        margin a clock running ahead would re-claim in a tight loop until then."""
        self._wait(job, max(held.lease_until_ms + self.opts.clock_skew_ms, now_ms + 1))
        return []

    def _call(self, job: DispatchJob, start_by_ms: int, now_ms: int) -> list[Command]:
        if self.stopped:
            # An acknowledgement failed: the outcome of a call made now could not be
            # recorded. Dropped, never called: the claim's lease runs out and the processor
            # reconciles the key.
            job.abandoned = True
            self._waiting.pop(job.claim_id, None)
            return self._give_up(job, now_ms)
        d = job.d
        job.stage, job.called = Stage.CALLING, True
        request = EffectRequest(d.key, d.attempt, job.claim_id, d.action, json.loads(d.args_json),
                                d.args_hash, json.loads(d.payload_json or "{}"))
        return [Call(job.id, request, self.opts.call_timeout_s, start_by_ms)]

    def _withdraw(self, job: DispatchJob, why: str, now_ms: int) -> list[Command]:
        """Report ``not_called`` (the attempt moves on uncounted; a copy is not skipped)."""
        job.stage, job.not_called = Stage.WITHDRAWING, True
        return [Produce(job.id, self._outcome(job, ev.OutcomeStatus.NOT_CALLED, "", why,
                                              now_ms))]

    def _report(self, job: DispatchJob, status: ev.OutcomeStatus, external_id: str,
                error: str, now_ms: int) -> list[Command]:
        job.stage, job.not_called = Stage.REPORTING, status is ev.OutcomeStatus.NOT_CALLED
        return [Produce(job.id, self._outcome(job, status, external_id, error, now_ms))]

    def _outcome(self, job: DispatchJob, status: ev.OutcomeStatus, external_id: str,
                 error: str, now_ms: int) -> ev.AttemptOutcome:
        return ev.AttemptOutcome(self._new_id(), job.key, job.d.attempt, job.claim_id, status,
                                 now_ms, external_id, error[:200], self.deduplicates)
