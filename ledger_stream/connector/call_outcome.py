"""A target call's outcome: the call made on the calling thread, then judged from what the
target returned or raised, counted and logged. Shared by the calls the connector runs on
its worker threads and those the target's own I/O finishes (``Target.start_apply``)."""

from __future__ import annotations

import logging
import time

from ledger_stream.connector import metrics, redaction
from ledger_stream.connector.calls import TargetBug
from ledger_stream.connector.commands import Call
from ledger_stream.connector.target import EffectRequest, Target
from ledger_stream.domain import events as ev
from ledger_stream.failpoints import failpoint
from ledger_stream.logs import log_fields

# The connector's own logger: an attempt's line reads as the connector's, as it always did.
logger = logging.getLogger("ledger_stream.connector.runtime")


def now_ms() -> int:
    return int(time.time() * 1000)


def call_target(target: Target, cmd: Call, failpoint_passed: bool = False
                ) -> tuple[ev.OutcomeStatus, str, str]:
    """Call ``target`` for ``cmd`` on this thread, unless its lease ran out (``not_called``,
    the target never asked): (status, external id, error summary)."""
    request = cmd.request
    if cmd.start_by_ms and now_ms() > cmd.start_by_ms:
        status, external_id, error = (ev.OutcomeStatus.NOT_CALLED, "",
                                      "lease ran out before the call")
        counted(target, request, status, external_id, error)
        return status, external_id, error
    if not failpoint_passed:
        failpoint("before_call")
    started = time.perf_counter()
    try:
        external_id, raised = target.apply(request, cmd.timeout_s), None
    except Exception as exc:  # the target classifies whatever it raised
        external_id, raised = "", exc
    return judged(target, request, started, external_id, raised)


def judged(target: Target, request: EffectRequest, started: float, external_id: str,
           raised: Exception | None) -> tuple[ev.OutcomeStatus, str, str]:
    """A call's outcome from what the target returned or raised; counted and logged. A
    :class:`TargetBug` is raised again (the caller reports the outcome unknown)."""
    if isinstance(raised, TargetBug):
        raise raised
    if raised is None:
        status, error = ev.OutcomeStatus.SUCCEEDED, ""
    else:
        status, error = target.classify(raised), redaction.summary(raised)
        external_id = ""  # never the target's text
    metrics.series(target.name).target_seconds.observe(time.perf_counter() - started)
    failpoint("after_call")
    counted(target, request, status, external_id, error)
    return status, external_id, error


def counted(target: Target, request: EffectRequest, status: ev.OutcomeStatus,
            external_id: str, error: str) -> None:
    metrics.series(target.name).attempts[status].inc()
    if logger.isEnabledFor(logging.INFO):  # its fields cost more than the check
        logger.info("attempt", extra=log_fields(
            key=request.key, attempt=request.attempt, claim_id=request.attempt_id,
            outcome=status.value, external_id=external_id, args_hash=request.args_hash,
            error=error))
