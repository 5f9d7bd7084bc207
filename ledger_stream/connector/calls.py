"""The connector's worker threads: target calls and lookups run on them, so a slow key (a
slow target, a lookup retried) never stalls the loop reading ``ledger.dispatch``."""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

Job = Callable[[], None]


class CallPool:
    """Up to ``size`` threads taking jobs from one queue, each started when a job finds no
    thread idle (a target that runs its calls itself, ``Target.start_apply``, leaves most
    of them unstarted).

    Leaner than ``ThreadPoolExecutor`` on the path every dispatch takes: a job is one
    ``SimpleQueue.put`` and the idle count updated under one lock, held only for that (no
    Future, no Condition; those cost about 30 µs of CPU per call here). A job reports its
    own result (the connector's jobs run their completion under the worker's lock); an
    exception it lets out is logged and its thread goes on to the next job.

    ``close`` drops the jobs not started; the ones running finish, and their threads end.
    The threads are daemons: a call still on the wire when the process exits has no outcome
    recorded, exactly as when the process is killed there (its lease runs out and the
    processor reconciles the key)."""

    def __init__(self, size: int, name: str) -> None:
        self._size, self._name = size, name
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job, less the jobs queued for them

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closed:
                return
            self._idle -= 1
            if self._idle < 0 and len(self._threads) < self._size:
                thread = threading.Thread(target=self._work, name=f"{self._name}_"
                                          f"{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                self._idle += 1  # the new thread takes this job
                thread.start()
        self._jobs.put(job)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        while True:
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except BaseException:  # noqa: BLE001 - one job's bug must not shrink the pool
                logger.exception("a connector job failed")
            with self._lock:
                self._idle += 1


def id_source() -> Callable[[], str]:
    """New ids for claims and the records produced: 32 hex digits, a random prefix drawn once
    per process and a counter, so unique across processes (two prefixes meet with odds of
    one in 2**64) and within one. uuid4 read 16 bytes from the kernel for every id, three
    per dispatch: a system call each, 30 µs apiece on a loaded machine."""
    prefix, counter = os.urandom(8).hex(), itertools.count()
    return lambda: f"{prefix}{next(counter):016x}"


class TargetBug(Exception):
    """What ``Target.start_apply`` itself raised: a bug, reported as one (the runtime's
    ``_report_call``)."""

    def __init__(self, bug: Exception) -> None:
        super().__init__(type(bug).__name__)
        self.bug = bug


def reraise(exc: BaseException) -> list[Any]:
    """A connector's completion that failed on a call's thread, raised again by the loop:
    there an error that records cannot be written stops the connector (runtime.py)."""
    raise exc
