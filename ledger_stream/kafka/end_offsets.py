"""End offsets of a topic's partitions for many concurrent callers, one request at a time.

Each caller needs an end offset read *after* it called (a status must reflect every receipt
written before it). Callers that arrive while a request is in flight wait for the next one,
which starts when the flight lands and covers everyone who arrived by then: like a group
commit, N concurrent callers cost about two requests, not N. One request asks every partition
(``list_offsets``, read-committed: the last stable offset), so callers of different
partitions share it too. A partition without a leader fails only its own callers: a request
is retried while a partition some covered caller asked for has no answer, and the others'
answers stand.
"""

from __future__ import annotations

import copy
import threading
import time

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

REQUEST_TIMEOUT_S = 5.0


class EndOffsets:
    def __init__(self, admin: AdminClient, topic: str, partitions: int,
                 patience_s: float = 15.0) -> None:
        self._admin = admin
        self._topic = topic
        self._partitions = partitions
        self._patience_s = patience_s
        self._cv = threading.Condition()
        self._issued = 0  # tickets handed out
        self._answered = 0  # every ticket up to here has an answer in _ends
        self._running = False
        self._ends: dict[int, int | BaseException] = {}  # a partition's end, or its error
        self._asked: set[int] = set()  # the partitions of callers the next request covers
        self._failed: tuple[int, BaseException] | None = None  # (tickets covered, error)

    def get(self, partition: int, patience_s: float | None = None) -> int:
        """``partition``'s end offset as of a request sent after this call began. A failed
        request fails every caller it covered (each does not retry on its own); the request
        this caller leads is retried for ``patience_s`` (default: the instance's)."""
        if not 0 <= partition < self._partitions:
            raise ValueError(f"partition {partition} of {self._topic} does not exist "
                             f"({self._partitions} partitions)")
        with self._cv:
            self._issued += 1
            ticket = self._issued
            self._asked.add(partition)
            while self._answered < ticket:
                if self._failed is not None and self._failed[0] >= ticket:
                    raise _own_copy(self._failed[1]) from self._failed[1]
                if self._running:
                    self._cv.wait()
                    continue
                self._running, covers = True, self._issued
                asked, self._asked = self._asked, set()
                try:
                    self._cv.release()
                    try:
                        ends = self._query(self._patience_s if patience_s is None
                                           else patience_s, asked)
                    finally:
                        self._cv.acquire()
                    self._ends, self._answered = ends, covers
                except BaseException as exc:
                    self._failed = (covers, exc)
                    raise
                finally:
                    self._running = False
                    self._cv.notify_all()
            found = self._ends[partition]
            if isinstance(found, BaseException):
                raise _own_copy(found) from found
            return found

    def _query(self, patience_s: float, asked: set[int]) -> dict[int, int | BaseException]:
        """Every partition's last stable offset (or its error), retried through leader
        elections while a partition in ``asked`` has none."""
        deadline = time.monotonic() + patience_s
        wanted = {TopicPartition(self._topic, p): OffsetSpec.latest()
                  for p in range(self._partitions)}
        while True:
            try:
                futures = self._admin.list_offsets(
                    wanted, isolation_level=IsolationLevel.READ_COMMITTED,
                    request_timeout=REQUEST_TIMEOUT_S)
            except KafkaException:
                # NOT_LEADER / LEADER_NOT_AVAILABLE after topic creation or a broker restart
                # pass in moments; anything else is raised once the patience runs out.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            ends: dict[int, int | BaseException] = {}
            for tp, future in futures.items():
                try:
                    ends[tp.partition] = int(future.result().offset)
                except KafkaException as exc:
                    ends[tp.partition] = exc
            if time.monotonic() > deadline or not any(
                    isinstance(ends.get(p), BaseException) for p in asked):
                return ends
            time.sleep(0.2)


def _own_copy(exc: BaseException) -> BaseException:
    """A caller's own exception object for a failure another thread raised: one object raised
    in several threads would gather every thread's traceback (and each ``raise`` rewrites it
    while another thread may be printing it)."""
    try:
        mine = copy.copy(exc)
    except Exception:  # an exception that cannot be rebuilt from its args
        return RuntimeError(f"end offsets unavailable: {exc!r}")
    mine.__traceback__ = None
    return mine
