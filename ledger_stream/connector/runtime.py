"""The connector runtime: the protocol of DESIGN §6 around one Target.

For each Dispatch of its target, in partition order:

1. Skip a dispatch id this instance already handled. Wait for ``not_before``.
2. Claim attempt n with a fresh claim id and wait for the answer naming that claim id.
   Grant: this claim alone may call the target. Held: claim again after ``lease_until``
   with a new claim id. Reconcile or Done: drop the dispatch (a Reconcile record is handled
   as work of its own when the feed reaches it).
   Fast path, only for targets that deduplicate by key: call without waiting for the answer.
3. With a grant, call only if the lease still covers the call's timeout and the time to
   record the outcome; otherwise report ``not_applied`` without calling.
4. Classify (a transport error after sending is ``unknown``), produce the outcome, wait for
   its acknowledgement, and only then commit the dispatch offset.

For each Reconcile of its target: look the key up (after the target's consistency window)
and report found / not_found / unqueryable. Never resend.

Guarantees: one target call per granted claim; an unknown outcome is never followed by a
call from this runtime before the processor decided (after a lookup) that it is safe.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from ledger_stream.config import Settings
from ledger_stream.connector import metrics
from ledger_stream.connector.feed import DispatchFeed
from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target
from ledger_stream.domain import events as ev
from ledger_stream.failpoints import failpoint
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.logs import log_fields
from ledger_stream.serde import AvroCodec

logger = logging.getLogger(__name__)

HANDLED_MEMORY = 100_000


@dataclass(frozen=True)
class ConnectorOptions:
    instance_id: str = ""
    lease_ms: int = 30_000
    call_timeout_s: float = 10.0
    record_margin_s: float = 2.0  # time to produce the outcome and get its ack
    lookup_delay_s: float = 0.0  # the target's consistency window before "not found"
    answer_timeout_s: float = 10.0  # claim again if the processor has not answered
    lookup_patience_s: float = 30.0  # keep retrying a failing lookup this long (outages)
    fast_path: bool | None = None  # default: the target deduplicates

    def check(self) -> None:
        if self.lease_ms / 1000 < self.call_timeout_s + self.record_margin_s:
            raise ValueError("the lease must cover the call timeout plus the record margin")


class _Remembered:
    """A bounded set of ids this instance already handled."""

    def __init__(self, limit: int = HANDLED_MEMORY) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit

    def __contains__(self, item: str) -> bool:
        return item in self._ids

    def add(self, item: str) -> None:
        self._ids[item] = None
        if len(self._ids) > self._limit:
            self._ids.popitem(last=False)


def _now_ms() -> int:
    return int(time.time() * 1000)


class ConnectorWorker:
    def __init__(self, settings: Settings, bootstrap: str, target: Target,
                 options: ConnectorOptions, codec: AvroCodec | None = None) -> None:
        options.check()
        self._target = target
        self._opts = options
        self._instance = options.instance_id or f"{target.name}-{uuid.uuid4().hex[:8]}"
        self._fast = target.deduplicates if options.fast_path is None else options.fast_path
        if self._fast and not target.deduplicates:
            raise ValueError("the fast path needs a target that deduplicates by key")
        codec = codec or AvroCodec()
        self._out = EventProducer(settings, bootstrap, codec, acks="all")
        self._feed = DispatchFeed(bootstrap, settings.topic("dispatch"),
                                  f"{settings.topic_prefix}.connector.{target.name}", codec,
                                  settings.session_timeout_ms)
        self._handled = _Remembered()

    def run(self, stop: threading.Event | None = None, idle_exit_s: float | None = None) -> None:
        """Handle dispatch records until ``stop`` is set (or nothing came for idle_exit_s)."""
        stop = stop or threading.Event()
        idle_since = time.monotonic()
        try:
            while not stop.is_set():
                record = self._feed.next(timeout_s=0.5)
                if record is None:
                    if idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                        return
                    continue
                idle_since = time.monotonic()
                msg, event = record
                self._handle(event)
                self._feed.commit(msg)
        finally:
            self._feed.close()
            self._target.close()

    def _handle(self, event: object) -> None:
        if isinstance(event, ev.Dispatch) and event.target == self._target.name:
            if event.dispatch_id not in self._handled:
                self._dispatch(event)
                self._handled.add(event.dispatch_id)
        elif isinstance(event, ev.Reconcile) and event.target == self._target.name:
            marker = f"reconcile:{event.key}:{event.attempt}:{event.claim_id}"
            if marker not in self._handled:
                self._reconcile(event)
                self._handled.add(marker)

    # --- dispatches -----------------------------------------------------------------------

    def _dispatch(self, d: ev.Dispatch) -> None:
        self._feed.idle_until(d.not_before_ms / 1000)
        while True:
            claim_id = uuid.uuid4().hex
            if not self._fast:
                self._feed.expect(claim_id)
            failpoint("before_claim")
            self._send("attempts", ev.AttemptClaim(
                uuid.uuid4().hex, d.key, d.attempt, claim_id, self._instance,
                self._opts.lease_ms, _now_ms()))
            if self._fast:
                self._call(d, claim_id, _now_ms() + self._opts.lease_ms)
                return
            answer = self._feed.answer(claim_id, self._opts.answer_timeout_s)
            kind = type(answer).__name__ if answer is not None else "none"
            metrics.CLAIM_ANSWERS.labels(self._target.name, kind).inc()
            if isinstance(answer, ev.Grant):
                self._call(d, claim_id, answer.lease_until_ms)
                return
            if isinstance(answer, ev.Held):
                self._feed.idle_until(answer.lease_until_ms / 1000)
                continue
            if answer is None:
                logger.warning("no answer to claim; claiming again", extra=log_fields(
                    key=d.key, attempt=d.attempt, claim_id=claim_id))
                continue
            return  # Reconcile or Done: the dispatch is not ours to apply

    def _call(self, d: ev.Dispatch, claim_id: str, lease_until_ms: int) -> None:
        left_s = lease_until_ms / 1000 - time.time() - self._opts.record_margin_s
        if left_s < self._opts.call_timeout_s:
            self._report(d, claim_id, ev.OutcomeStatus.NOT_APPLIED, "",
                         "lease ran out before the call")
            return
        request = EffectRequest(d.key, d.attempt, claim_id, d.action, json.loads(d.args_json),
                                d.args_hash, json.loads(d.payload_json or "{}"))
        failpoint("before_call")
        started = time.perf_counter()
        try:
            external_id = self._target.apply(request, self._opts.call_timeout_s)
            status, error = ev.OutcomeStatus.SUCCEEDED, ""
        except Exception as exc:  # the target classifies whatever it raised
            external_id, status = "", self._target.classify(exc)
            error = f"{type(exc).__name__}: {str(exc)[:200]}"
        metrics.TARGET_SECONDS.labels(self._target.name).observe(time.perf_counter() - started)
        failpoint("after_call")
        self._report(d, claim_id, status, external_id, error)

    def _report(self, d: ev.Dispatch, claim_id: str, status: ev.OutcomeStatus,
                external_id: str, error: str) -> None:
        metrics.ATTEMPTS.labels(self._target.name, status.value).inc()
        logger.info("attempt reported", extra=log_fields(
            key=d.key, attempt=d.attempt, claim_id=claim_id, outcome=status.value,
            external_id=external_id, args_hash=d.args_hash))
        failpoint("before_outcome")
        self._send("attempts", ev.AttemptOutcome(
            uuid.uuid4().hex, d.key, d.attempt, claim_id, status, _now_ms(), external_id,
            error))
        failpoint("after_outcome")

    # --- reconciliation -------------------------------------------------------------------

    def _reconcile(self, r: ev.Reconcile) -> None:
        self._feed.idle_until(time.time() + self._opts.lookup_delay_s)
        status, external_id, error = self._lookup(r.key)
        metrics.RECONCILIATIONS.labels(self._target.name, status.value).inc()
        logger.info("reconciled", extra=log_fields(
            key=r.key, attempt=r.attempt, result=status.value, external_id=external_id))
        self._send("attempts", ev.ReconcileResult(
            uuid.uuid4().hex, r.key, r.attempt, r.claim_id, status,
            self._target.deduplicates, _now_ms(), external_id, error))

    def _lookup(self, key: str) -> tuple[ev.ReconcileStatus, str, str]:
        """(status, external id, error). A lookup that fails is retried with backoff for
        ``lookup_patience_s`` (a target restarting is not a target without lookup)."""
        give_up = time.monotonic() + self._opts.lookup_patience_s
        delay = 0.2
        while True:
            try:
                found = self._target.lookup(key, self._opts.call_timeout_s)
            except LookupUnavailable as exc:
                if not self._target.queryable or time.monotonic() + delay > give_up:
                    return ev.ReconcileStatus.UNQUERYABLE, "", str(exc)[:200]
                self._feed.idle_until(time.time() + delay)
                delay = min(delay * 2, 5.0)
                continue
            if found:
                return ev.ReconcileStatus.FOUND, found, ""
            return ev.ReconcileStatus.NOT_FOUND, "", ""

    def _send(self, role: str, event: object) -> None:
        """Produce and wait for the acknowledgement: nothing is committed before it."""
        self._out.send(role, event)
        self._out.flush()
