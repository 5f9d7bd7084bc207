"""The producer's blocking calls, bounded in time on a thread of their own, and what a Kafka
error during one means for the batch (``classify``)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException

from ledger_stream.processor.exceptions import BatchAbandoned

STALE_GENERATION = frozenset({
    KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS, KafkaError.FENCED_INSTANCE_ID,
    KafkaError._ASSIGNMENT_LOST, KafkaError.FENCED_MEMBER_EPOCH,
})
# KIP-848: the batch carried the member epoch of its poll and the group has since moved on
# by one assignment; the member is still in the group, so the next batch simply retries.
STALE_EPOCH = KafkaError.STALE_MEMBER_EPOCH
WAIT_SLICE_S = 0.25  # how often a bounded wait looks at the stop deadline


class Caller:
    """A thread that runs blocking calls one at a time, so a bounded call costs no thread
    start. A call that never returns keeps its thread; the next call gets a new one."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.ended = threading.Event()  # the thread returned (after stop)
        threading.Thread(target=self._serve, name="kafka-calls", daemon=True).start()

    def _serve(self) -> None:
        try:
            while (job := self._calls.get()) is not None:
                job()
                del job  # nothing of a finished call stays referenced here
        finally:
            self.ended.set()

    def stop(self) -> None:
        """End the thread once the calls handed to it are done."""
        self._calls.put(None)

    def run(self, call: Callable[[], object], timeout_s: float,
            left: Callable[[], float] | None = None) -> list[BaseException] | None:
        """The call's exception in a list ([] if it returned), or None if it did not return
        within ``timeout_s``, or before ``left()`` (asked again every WAIT_SLICE_S: a stop
        can shorten a wait already begun) came to 0 (this caller is then stuck: use
        another)."""
        outcome: list[BaseException] = []
        finished = threading.Event()

        def job() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                # Without its traceback: that holds this frame, whose ``outcome`` holds the
                # exception, a cycle that kept a stuck call's producer alive until some
                # later garbage collection destroyed it, on whatever thread ran then.
                outcome.append(exc.with_traceback(None))
            finally:
                finished.set()

        self._calls.put(job)
        until = time.monotonic() + timeout_s
        while not finished.wait(max(0.0, min(WAIT_SLICE_S, until - time.monotonic()))):
            if time.monotonic() >= until or (left is not None and left() <= 0):
                return None
        return outcome


def classify(exc: KafkaException, step: str) -> BatchAbandoned:
    """The BatchAbandoned a Kafka error during ``step`` means."""
    err: KafkaError = exc.args[0]
    what = f"{step}: {err.name()}: {err.str()}"
    if err.code() == STALE_EPOCH:
        return BatchAbandoned("fenced", f"stale member epoch: the group reassigned during "
                              f"the batch ({what})")
    if err.code() in STALE_GENERATION:
        return BatchAbandoned("fenced", f"fenced: the group moved on ({what})",
                              await_rebalance=True)
    if err.fatal():
        return BatchAbandoned("producer_fatal", f"producer failed ({what})", new_producer=True)
    if err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                      KafkaError.INVALID_PRODUCER_EPOCH):
        return BatchAbandoned("producer_fatal", f"producer fenced ({what})", new_producer=True)
    return BatchAbandoned("aborted", f"transaction aborted ({what})")
