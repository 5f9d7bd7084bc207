"""The connector process: the connector core (``core.py``; docs/design.md, 'The connector
protocol') driven by Kafka and a pool of worker threads.

One thread reads ``ledger.dispatch`` and feeds the core; up to ``max_in_flight`` target
calls and lookups run at once, on the target's own I/O where it has one
(``Target.start_apply``) or on worker threads, so a slow key (a backoff, a Held, a slow
target) never stalls the others; produces are confirmed by their delivery reports, and
only then does the core move on. The core's commands are executed here:

- Produce: to ``ledger.attempts``; the delivery report is the acknowledgement. A failed one
  stops the process without committing anything more (exit status 3). While the producer's
  local queue is full, the loop polls it until there is room; a call's thread never waits
  for room: it leaves the event, encoded once, to the loop (``_resume``).
- Call: handed to ``Target.start_apply`` (untraced calls) or run on a worker, never
  started after the grant's ``start_by`` (reported ``not_called`` instead); classified by
  the Target; failpoints before and after.
- Lookup: on a worker.
- Commit: the partition's offset, asynchronously; synchronously when a partition is revoked
  or the process stops.
- Fence (a pre-granted dispatch): its offset, asynchronously, asked on the consumer's
  thread (where revocations run) while the partition is assigned and SIGTERM has not come;
  its answer (``on_commit``, inside ``poll``) is handed to the core on the next pass.

Revocation (cooperative rebalancing) and SIGTERM give up every claim still waiting for its
answer (``not_called``) and let the calls on the wire finish and report.

A failure is reported, logged and traced as a target error summary (``redaction.py``):
never an exception's message, which may quote the target's answer.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import confluent_kafka
from confluent_kafka import KafkaError, Message

from ledger_stream import tracing
from ledger_stream.config import Settings
from ledger_stream.connector import metrics, redaction
from ledger_stream.connector.call_outcome import call_target, judged, now_ms
from ledger_stream.connector.calls import CallPool, TargetBug, id_source, reraise
from ledger_stream.connector.commands import (
    Call,
    Command,
    Commit,
    Fence,
    Lookup,
    LookupAnswer,
    Produce,
    Record,
    Stop,
)
from ledger_stream.connector.core import ConnectorCore, writes_fenced
from ledger_stream.connector.feed import ConsumerFactory, DispatchFeed
from ledger_stream.connector.fencing import FenceDriver
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.connector.target import Target
from ledger_stream.domain import events as ev
from ledger_stream.failpoints import failpoint
from ledger_stream.kafka.clients import Producer
from ledger_stream.kafka.layout import LayoutRefused, check_roles
from ledger_stream.kafka.producer import producer_config
from ledger_stream.kafka.reach import StopRequested, wait_for_kafka
from ledger_stream.logs import log_fields
from ledger_stream.serde import AvroCodec

logger = logging.getLogger(__name__)
IDLE_POLL_S = 0.05
LOCAL_POLL_S = 0.005
FENCE_POLL_S = 0.001

STOPPED_ON_FAILED_ACK = 3
Completion = Callable[[], list[Command]]


TRACES_LIMIT = 10_000  # trace contexts kept for keys in progress (tracing.py)


class ConnectorWorker(FenceDriver):
    def __init__(self, settings: Settings, bootstrap: str, target: Target,
                 options: ConnectorOptions, codec: AvroCodec | None = None, *,
                 producer: confluent_kafka.Producer | None = None,
                 consumer: confluent_kafka.Consumer | ConsumerFactory | None = None) -> None:
        """``producer`` and ``consumer`` replace the Kafka clients built from ``bootstrap``
        (a CPU harness drives the real loop with clients of its own)."""
        self._target, self._bootstrap = target, bootstrap
        metrics.start_series(target.name)
        self._kafka_timeout_s = settings.connection.timeout_s
        self._startup_wait_s = settings.connection.startup_wait_s
        self._group = f"{settings.topics.prefix}.connector.{target.name}"
        instance = options.instance_id or f"{target.name}-{uuid.uuid4().hex[:8]}"
        self._codec = codec or AvroCodec()
        self._core = ConnectorCore(target.name, target.deduplicates, target.queryable,
                                   replace(options, instance_id=instance), id_source(),
                                   pregrant=writes_fenced(self._codec))
        self._opts, self._attempts = options, settings.topic("attempts")
        # A claim and an outcome each stand between a dispatch and its receipt: librdkafka's
        # default 5 ms wait for a batch added 10 ms to every fresh submit. 1 ms keeps most of
        # the batching under load (no linger at all cost 3-11% of the throughput).
        self._producer = producer or Producer(
            producer_config(bootstrap, acks="all", **{"linger.ms": 1}))
        # Delivery reports (and a completion on the loop's own thread, or the rest of one
        # whose event met a full producer queue) wait here for the loop. A call or lookup
        # that ends on another thread is handled there at once, under ``_lock``: handed to
        # the loop, its outcome waited up to a poll (5 ms) before it was produced.
        self._done: queue.SimpleQueue[Completion] = queue.SimpleQueue()
        self._lock = threading.RLock()  # the core and ``_to_commit``, between threads
        self._loop_thread: int | None = None
        self._pool = CallPool(options.max_in_flight, f"{target.name}-call")
        self._to_commit: dict[int, int] = {}
        # key -> the trace context its claim and outcome carry: the dispatch's, then the
        # call's span (tracing.py); only this target's keys whose dispatch carried one, the
        # oldest dropped past TRACES_LIMIT (a key answered without an outcome of ours).
        self._traces: dict[str, tracing.Headers] = {}
        self._traces_lock = threading.Lock()
        self._stopping = threading.Event()  # ``serve``'s stop: SIGTERM came
        self._asked: dict[tuple[int, int], int] = {}  # (partition, offset) -> fencing job
        self._feed = DispatchFeed(bootstrap, settings.topic("dispatch"), self._group,
                                  self._codec, settings.processor.session_timeout_ms,
                                  self._assigned, self._revoked, consumer, self._fenced)
        self.exit_status = 0
        self._layout_topics = [settings.topic(role) for role in
                               ("changelog", "dispatch", "attempts", "receipts")]

    # --- the loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None, idle_exit_s: float | None = None) -> int:
        """Handle dispatches until ``stop`` is set (or nothing came for ``idle_exit_s``).
        Returns the exit status: 0, or 3 when an acknowledgement failed."""
        stop = stop or threading.Event()
        if not wait_for_kafka(self._bootstrap, f"connector {self._target.name}", stop,
                              attempt_s=self._kafka_timeout_s):
            self._close()
            return self.exit_status
        try:  # its topics at the layout the state was built under (kafka/layout.py)
            check_roles(self._bootstrap, self._layout_topics[0], self._layout_topics[1:],
                        self._kafka_timeout_s, wait_s=self._startup_wait_s, stop=stop)
        except StopRequested:  # SIGTERM while the check waited for the cluster
            logger.info("connector stopped while waiting for Kafka at start-up",
                        extra=log_fields(target=self._target.name))
            self._close()
            return self.exit_status
        except LayoutRefused:
            self._close()
            raise
        return self.serve(stop, idle_exit_s)

    def serve(self, stop: threading.Event, idle_exit_s: float | None = None) -> int:
        """``run`` once Kafka is reachable and the topics' layout checked."""
        logger.info("connector started", extra=log_fields(
            target=self._target.name, instance=self._core.instance, group=self._group,
            max_in_flight=self._opts.max_in_flight, deduplicates=self._target.deduplicates))
        idle_since = time.monotonic()
        self._loop_thread, self._stopping = threading.get_ident(), stop
        try:
            while not stop.is_set() and not self._core.stopped:
                records = self._feed.poll(self._poll_timeout())
                with self._lock:
                    for record in records:
                        self._remember_trace(record)
                        self._execute(self._core.record(record, now_ms()))
                    self._serve()
                    busy = not self._core.idle()
                if records or busy:
                    idle_since = time.monotonic()
                elif idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                    break
            if not self._core.stopped:
                self._drain()
        finally:
            self._close()
        return self.exit_status

    def _poll_timeout(self) -> float:
        """How long the feed's poll may wait: until the next due wake-up, at most 50 ms;
        5 ms while a job waits for a call, a lookup or a delivery report (seen only between
        polls: a finished call waited up to 50 ms before its outcome was produced); 1 ms
        while a fence is outstanding (its answer, served inside poll, does not end it)."""
        with self._lock:
            wake = self._core.next_wake_ms()
            local = self._core.awaits_local()
        left = IDLE_POLL_S if wake is None else max(0.0, (wake - now_ms()) / 1000)
        return min(left, FENCE_POLL_S if self._asked else LOCAL_POLL_S if local
                   else IDLE_POLL_S)

    def _complete(self, completion: Completion) -> None:
        """Run a finished call's or lookup's completion now, on the thread it finished on,
        if the lock is free; else (the loop or another completion holds it, or this is the
        loop's own thread: a call that failed as it started) leave it to the loop's next
        pass, after the commands being executed. Never waits for the lock: 256 threads
        queueing on it cost more CPU than the hand-off they replaced."""
        if threading.get_ident() != self._loop_thread and self._lock.acquire(blocking=False):
            try:
                self._execute(completion())
            except BaseException as exc:  # noqa: BLE001 - stops the connector, as on the loop
                self._done.put(partial(reraise, exc))  # not only a log line, its job stuck
            finally:
                self._lock.release()
            return
        self._done.put(completion)

    def _serve(self) -> None:
        """Delivery reports, completions left to the loop, due wake-ups, commits (under
        ``_lock``)."""
        self._producer.poll(0)
        while True:
            try:
                completion = self._done.get_nowait()
            except queue.Empty:
                break
            self._execute(completion())
        self._execute(self._core.tick(now_ms()))
        if self._to_commit and not self._core.stopped:
            self._feed.commit(self._to_commit)
            self._to_commit = {}

    def _drain(self) -> None:
        """SIGTERM: give up waiting claims, let calls on the wire finish and report."""
        with self._lock:
            self._shut_down(now=True)
        deadline = time.monotonic() + self._opts.call_timeout_s + self._opts.record_margin_s + 5
        while not self._core.idle() and not self._core.stopped and time.monotonic() < deadline:
            self._feed.poll(0.05)
            with self._lock:
                self._serve()
        self._producer.flush(10)
        with self._lock:
            self._serve()
            if not self._core.stopped:
                self._feed.commit(self._to_commit, wait=True)

    def _close(self) -> None:
        self._pool.close()
        self._feed.close()
        self._target.close()

    # --- rebalancing (called from inside poll) --------------------------------------------

    def _assigned(self, partitions: list[int]) -> None:
        with self._lock:
            for p in partitions:
                self._core.assigned(p)
        logger.info("partitions assigned", extra=log_fields(partitions=partitions))

    def _revoked(self, partitions: list[int]) -> None:
        """Give up the claims waiting on these partitions and commit what is handled before
        the partitions go (after this callback, a commit for them would be refused)."""
        with self._lock:
            self._execute(self._core.revoked(partitions, now_ms()))
            done = {p: o for p, o in self._to_commit.items() if p in partitions}
            self._feed.commit(done, wait=True)
            for p in done:
                self._to_commit.pop(p, None)
        logger.info("partitions revoked", extra=log_fields(partitions=partitions))

    # --- commands -------------------------------------------------------------------------

    def _execute(self, commands: list[Command]) -> None:
        for i, cmd in enumerate(commands):
            if isinstance(cmd, Produce):
                send = self._produce(cmd)
                if send is not None:  # the queue is full, off the loop: the loop goes on
                    self._done.put(partial(self._resume, send, commands[i + 1:]))
                    return
            elif isinstance(cmd, Call):
                self._start_call(cmd)
            elif isinstance(cmd, Lookup):
                self._pool.submit(partial(self._lookup, cmd))
            elif isinstance(cmd, Commit):
                self._to_commit[cmd.partition] = cmd.offset
            elif isinstance(cmd, Fence):
                if threading.get_ident() == self._loop_thread:
                    self._execute(self._fence(cmd))
                else:  # the consumer is the loop's: the fence waits for its next pass
                    self._done.put(partial(self._fence, cmd))
            elif isinstance(cmd, Stop):
                self._stop(cmd.reason)

    def _produce(self, cmd: Produce) -> Callable[[], None] | None:
        """Produce ``cmd``'s event. None once it is in the producer's queue; else (that
        queue is full, on a thread that is not the loop's) what puts it there, which the
        loop runs (``_resume``)."""
        event = cmd.event
        if isinstance(event, ev.AttemptClaim):
            failpoint("before_claim")
        elif isinstance(event, ev.AttemptOutcome):
            failpoint("before_outcome")

        def delivered(error: KafkaError | None, _msg: Message) -> None:
            self._done.put(lambda: self._acknowledged(cmd, error))

        value = self._codec.encode(event)
        with self._traces_lock:
            trace = self._traces.get(event.key, ())
            if not isinstance(event, ev.AttemptClaim):  # the key's last report: done with it
                self._traces.pop(event.key, None)
        headers: list[tuple[str, str | bytes | None]] | None = list(trace) or None
        send = partial(self._producer.produce, self._attempts, value=value,
                       key=event.key.encode("utf-8"), on_delivery=delivered, headers=headers)
        if threading.get_ident() != self._loop_thread:
            try:
                send()
                return None
            except BufferError:
                # The local queue is full. Waiting here for room would hold the lock the
                # loop needs to poll the producer (what empties the queue) and, for a call
                # the HTTP target's exchange loop carried, keep that loop from reading any
                # other answer, for as long as the brokers take.
                return send
        self._send(send)
        return None

    def _send(self, send: Callable[[], None]) -> None:
        """``send()`` on the loop's thread: while the producer's local queue is full, its
        delivery reports are polled (which makes room once the brokers answer)."""
        while True:
            try:
                send()
                return
            except BufferError:
                self._producer.poll(0.1)

    def _resume(self, send: Callable[[], None], rest: list[Command]) -> list[Command]:
        """A completion's commands from the Produce that met a full queue on the thread the
        call ended on: produced here, on the loop, after its poll; then the rest, in order.
        The event was encoded (and its failpoint passed) once, there: it is produced once."""
        self._send(send)
        return rest

    def _acknowledged(self, cmd: Produce, error: KafkaError | None) -> list[Command]:
        if error is None and isinstance(cmd.event, ev.AttemptOutcome):
            failpoint("after_outcome")
        elif isinstance(cmd.event, ev.AttemptClaim) and cmd.event.fenced:
            self._shut_down()  # SIGTERM came: the claim is withdrawn, not called
        what = type(cmd.event).__name__
        return self._core.produced(cmd.job_id, error is None, now_ms(),
                                   "" if error is None else f"{what}: {error.str()}")

    def _remember_trace(self, record: Record) -> None:
        event = record.event
        if not record.trace or not isinstance(event, ev.Dispatch | ev.Reconcile) \
                or getattr(event, "target", self._target.name) != self._target.name:
            return
        with self._traces_lock:
            self._traces.pop(event.key, None)
            self._traces[event.key] = record.trace
            while len(self._traces) > TRACES_LIMIT:
                self._traces.pop(next(iter(self._traces)))

    def _start_call(self, cmd: Call) -> None:
        """Hand the call to the target's own I/O (``Target.start_apply``) where it can take
        it, else to a worker thread. A call with a span to open (tracing), or whose lease ran
        out (reported ``not_called``), goes to a thread as before."""
        request = cmd.request
        with self._traces_lock:
            traced = request.key in self._traces
        if traced or tracing.installed() or (cmd.start_by_ms and now_ms() > cmd.start_by_ms):
            self._pool.submit(partial(self._call, cmd))
            return
        failpoint("before_call")
        started = time.perf_counter()
        try:
            if self._target.start_apply(request, cmd.timeout_s,
                                        partial(self._applied, cmd, started)):
                return
        except Exception as exc:  # a Target's bug: the request may have gone out
            self._applied(cmd, started, "", TargetBug(exc))
            return
        self._pool.submit(partial(self._call, cmd, True))

    def _applied(self, cmd: Call, started: float, external_id: str,
                 error: Exception | None) -> None:
        """``start_apply``'s ``done``: judged and reported as a call on a thread is."""
        self._report_call(cmd, lambda: judged(self._target, cmd.request, started,
                                              external_id, error))

    def _call(self, cmd: Call, failpoint_passed: bool = False) -> None:
        self._report_call(cmd, lambda: self._traced_call(cmd, failpoint_passed))

    def _report_call(self, cmd: Call, outcome: Callable[[], tuple[ev.OutcomeStatus, str, str]]
                     ) -> None:
        try:
            status, external_id, error = outcome()
        except Exception as exc:
            # A bug in a Target (its classify) or around the call: the request may have gone
            # out, so the outcome is unknown (the processor reconciles the key); a job left
            # calling for good would hold its key, a slot and its partition's commits.
            # Frames and classes only: a message (or its cause's) may quote the target.
            exc = exc.bug if isinstance(exc, TargetBug) else exc
            logger.error("call failed inside the connector", extra=log_fields(
                key=cmd.request.key, attempt=cmd.request.attempt,
                claim_id=cmd.request.attempt_id, error=redaction.bug_report(exc)))
            status, external_id = ev.OutcomeStatus.UNKNOWN, ""
            error = redaction.summary(exc)
        # Only now: the outcome's record takes the context stored by the call.
        self._complete(lambda: self._core.called(cmd.job_id, status, external_id, error,
                                                 now_ms()))

    def _traced_call(self, cmd: Call, failpoint_passed: bool = False
                     ) -> tuple[ev.OutcomeStatus, str, str]:
        request = cmd.request
        with self._traces_lock:
            parent = self._traces.get(request.key, ())
        if not parent and not tracing.installed():
            # A span with neither a parent nor a provider records and passes on nothing:
            # skipped, it cost about 30 µs of CPU per call.
            return call_target(self._target, cmd, failpoint_passed)
        attributes = {"ledger.operation_key": request.key, "ledger.attempt": request.attempt,
                      "ledger.attempt_id": request.attempt_id,
                      "ledger.args_hash": request.args_hash}
        with tracing.span(f"ledger.apply {self._target.name}", parent=parent, kind="client",
                          attributes=attributes) as span:
            status, external_id, error = call_target(self._target, cmd, failpoint_passed)
            tracing.annotate(span, **{"ledger.outcome": status.value})
            if status is not ev.OutcomeStatus.SUCCEEDED:
                tracing.failed(span, f"{status.value}: {error.split(' [', 1)[0]}")
            if parent:  # the outcome carries the call's context back to the receipt
                with self._traces_lock:
                    self._traces[request.key] = tracing.current_headers()
        return status, external_id, error

    def _lookup(self, cmd: Lookup) -> None:
        try:
            answer = LookupAnswer(self._target.lookup(cmd.key, cmd.timeout_s))
        except Exception as exc:  # LookupUnavailable; a bug must not kill the worker thread
            answer = LookupAnswer(unavailable=redaction.summary(exc))
        result = "found" if answer.external_id else "unavailable" if answer.unavailable \
            else "not_found"
        metrics.RECONCILIATIONS.labels(self._target.name, result).inc()
        logger.info("looked up", extra=log_fields(key=cmd.key, result=result,
                                                  external_id=answer.external_id or ""))
        self._complete(lambda: self._core.looked_up(cmd.job_id, answer, now_ms()))

    def _stop(self, reason: str) -> None:
        logger.error("stopping without committing: an acknowledgement failed; the records "
                     "not committed are read again by the next owner",
                     extra=log_fields(reason=reason))
        self.exit_status = STOPPED_ON_FAILED_ACK


__all__ = ["STOPPED_ON_FAILED_ACK", "ConnectorOptions", "ConnectorWorker"]
