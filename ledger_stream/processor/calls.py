"""Blocking calls of the Kafka clients run on a thread of their own, so that the caller can
bound how long it waits for one (delivery.py: librdkafka does not always honour a
transactional call's own timeout)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

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
