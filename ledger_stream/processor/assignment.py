"""The partitions this processor owns, as the consumer group's rebalance callbacks change
them. Two protocols (``group_protocol``):

- classic, eager range: everything is revoked, then a new set assigned;
- consumer (KIP-848), incremental: each callback adds or removes only the partitions that
  move; the others keep their stores and their place in the stream. The broker's range
  assignor gives intents-p and attempts-p to one member once the group is stable, but one
  may come a heartbeat before the other (its previous owner is still giving it up), so a
  partition that comes alone is held, not read, until its co-partition comes.

On assignment, for each state partition p (intents-p and attempts-p must come together, or
p is refused, eager, or held, incremental): read the group's committed offsets
(read_committed, so a transaction still holding offsets for p is waited for), open p's
store, catch it up from the changelog, and only then let the consumer read p from the
committed offsets. On revocation (or loss) the stores are closed: the callbacks run only
inside ``poll``, between batches, so no batch is ever half-applied to a store that is
closing.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections import defaultdict
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ledger_stream.domain.policy import Policy
from ledger_stream.logs import log_fields
from ledger_stream.processor import metrics
from ledger_stream.processor.batch import rewind_to
from ledger_stream.processor.changelog import Positions
from ledger_stream.processor.exceptions import ProcessorError
from ledger_stream.processor.restore import RestoreStats, restore_partitions
from ledger_stream.state import PartitionStore

logger = logging.getLogger(__name__)

COMMITTED_TIMEOUT_S = 60.0  # covers a stale transaction's timeout and its abort
COMMITTED_RETRY_PAUSE_S = 0.2
# The group's coordinator is moving (a broker killed or restarted): asked again until
# COMMITTED_TIMEOUT_S. A chaos soak saw a processor exit on "Not coordinator" here
# (2026-12-03) while its coordinator's broker was down.
COORDINATOR_MOVING = frozenset({
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TRANSPORT,
    KafkaError._WAIT_COORD, KafkaError.REBALANCE_IN_PROGRESS})
# What processor.policy.policy_revision names a policy by (offsets committed by anything
# else carry no metadata, or other text: not a revision).
REVISION = re.compile(r"p-[0-9a-f]{12}")
RESTORE_ATTEMPTS = 8  # a broker restart can take a minute here: wait it out, then give up


class Assignment:
    def __init__(self, open_store: Callable[[int], PartitionStore], restorer: Consumer,
                 policy: Policy, topics: tuple[str, str], changelog_topic: str,
                 group: str, ends: Consumer, incremental: bool = False) -> None:
        self._open_store = open_store
        self.home_count: int | None = None  # restore only rows homed here at this count
        self._restorer = restorer
        self._ends = ends  # asks for the changelog's high watermarks (restore.py)
        self._policy = policy
        self.topics = topics  # (intents, attempts)
        self._changelog = changelog_topic
        self._group = group
        self.stores: dict[int, PartitionStore] = {}
        self.committed: dict[int, Positions] = {}
        self.epoch = 0  # counts rebalance callbacks: records polled across one are stale
        self.incremental = incremental
        # Incremental only: every (topic, partition) the group gave, read or held.
        self.held: set[tuple[str, int]] = set()
        # Partitions released since the runtime last cleared this: their records polled
        # before the release belong to an ownership that ended.
        self.released: set[int] = set()

    @property
    def owned(self) -> list[int]:
        return sorted(self.stores)

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.epoch += 1
        accepted = (self._completed(partitions) if self.incremental
                    else self._co_partitioned(partitions))
        started = time.monotonic()
        committed = self._read_committed(consumer, accepted)
        for partition in accepted:
            self.stores[partition] = self._open_store(partition)
            self.committed[partition] = committed[partition]
        stats = self._restore({p: self.stores[p] for p in accepted}, committed)
        metrics.RESTORE_SECONDS.observe(stats.seconds)
        metrics.RESTORE_RECORDS.labels("applied").inc(stats.applied)
        metrics.RESTORE_RECORDS.labels("skipped").inc(stats.skipped)
        assigned = [tp for p in accepted for tp in rewind_to(self.committed[p], self.topics, p)]
        if self.incremental:
            # Always called, even with nothing: the client would otherwise start reading
            # what the callback left out (a partition held without its co-partition).
            consumer.incremental_assign(assigned)
        else:
            consumer.assign(assigned)
        # A partition paused while the group moved on (the runtime pauses everything while
        # it waits for a rebalance) stays paused across reassignment unless resumed.
        if assigned:
            consumer.resume(assigned)
        if self.incremental:
            metrics.PARTITIONS_HELD.set(len(self.waiting()))
        if accepted or not self.incremental:
            logger.info("partitions assigned", extra=log_fields(
                partitions=accepted, restore_seconds=round(time.monotonic() - started, 3),
                changelog_seconds=round(stats.seconds, 3),
                changelog_wait_seconds=round(stats.waited, 3),
                restored_records=stats.applied, skipped_records=stats.skipped))

    def _restore(self, stores: dict[int, PartitionStore], committed: dict[int, Positions]
                 ) -> RestoreStats:
        """Restore with a few retries; a partition that cannot be restored must not be
        decided, so the last failure ends the process (ProcessorError)."""
        for attempt in range(1, RESTORE_ATTEMPTS + 1):
            try:
                return restore_partitions(self._restorer, self._changelog, stores, committed,
                                          self._group, self._policy, self._ends,
                                          home_count=self.home_count)
            except ProcessorError as exc:
                if attempt == RESTORE_ATTEMPTS:
                    raise
                logger.warning("restore failed; retrying", extra=log_fields(
                    partitions=sorted(stores), attempt=attempt, error=str(exc)))
                time.sleep(min(attempt, 5))
        raise AssertionError("unreachable")

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(consumer, partitions, "partitions revoked")

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(consumer, partitions, "partitions lost (session expired): their "
                      "uncommitted batch, if any, was abandoned")

    def _release(self, consumer: Consumer, partitions: list[TopicPartition], what: str
                 ) -> None:
        self.epoch += 1
        released = sorted({tp.partition for tp in partitions} & set(self.stores))
        for partition in released:
            self.stores.pop(partition).close()
            self.committed.pop(partition, None)
            with contextlib.suppress(KeyError):
                metrics.CLOCK_LAG.remove(str(partition))
        self.released.update(released)
        if self.incremental:
            self.held -= {(tp.topic, tp.partition) for tp in partitions}
            # Both topics of each released partition stop being read (a co-partition the
            # group still gives us is held again); a partition that was only held was never
            # read, so it is not in the client's assignment to remove.
            consumer.incremental_unassign(
                [TopicPartition(t, p) for p in released for t in self.topics])
            metrics.PARTITIONS_HELD.set(len(self.waiting()))
        if released:
            logger.info(what, extra=log_fields(partitions=released))

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.stores.clear()

    def taken_back(self) -> list[int]:
        """Partitions released since ``released`` was cleared and owned again: their
        records polled before the release are stale, and the client reads them again from
        the committed offsets only for what it had not yet fetched."""
        return sorted(self.released & set(self.stores))

    def current(self, partition: int, taken_back: list[int]) -> bool:
        """Whether a record of ``partition`` polled across callbacks may be decided: owned
        now, and not released in between (a partition first accepted by a callback was
        read only after it)."""
        return partition in self.stores and partition not in taken_back

    def waiting(self) -> list[int]:
        """Incremental: partitions given by halves, held until the other half comes."""
        return sorted({p for _, p in self.held} - set(self.stores))

    def _completed(self, partitions: list[TopicPartition]) -> list[int]:
        """Incremental: the partitions these additions complete (both topics now given)."""
        self.held |= {(tp.topic, tp.partition) for tp in partitions}
        came = sorted({tp.partition for tp in partitions} - set(self.stores))
        accepted = [p for p in came if all((t, p) in self.held for t in self.topics)]
        waiting = sorted(set(came) - set(accepted))
        if waiting:
            logger.warning("partitions held until their co-partition comes",
                           extra=log_fields(partitions=waiting))
        return accepted

    def _co_partitioned(self, partitions: list[TopicPartition]) -> list[int]:
        topics: dict[int, set[str]] = defaultdict(set)
        for tp in partitions:
            topics[tp.partition].add(tp.topic)
        accepted = sorted(p for p, found in topics.items() if found == set(self.topics))
        refused = sorted(set(topics) - set(accepted))
        if refused:
            logger.error("refusing partitions assigned without their co-partition (intents "
                         "and attempts must share one partition count and the range "
                         "assignor)", extra=log_fields(partitions=refused))
        return accepted

    def _read_committed(self, consumer: Consumer, partitions: list[int]
                        ) -> dict[int, Positions]:
        wanted = [TopicPartition(t, p) for p in partitions for t in self.topics]
        if not wanted:
            return {}
        deadline = time.monotonic() + COMMITTED_TIMEOUT_S
        while True:
            try:
                found = consumer.committed(
                    wanted, timeout=max(1.0, deadline - time.monotonic()))
                break
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() not in COORDINATOR_MOVING or time.monotonic() > deadline:
                    raise ProcessorError(f"reading committed offsets failed: {error.str()}"
                                         ) from exc
                logger.warning("reading committed offsets: the coordinator is moving; "
                               "asking again", extra=log_fields(error=error.str()))
                time.sleep(COMMITTED_RETRY_PAUSE_S)
        self._note_other_policies(found)
        offsets = {(tp.topic, tp.partition): tp.offset for tp in found}
        intents, attempts = self.topics
        return {p: Positions(max(offsets[(intents, p)], -1), max(offsets[(attempts, p)], -1))
                for p in partitions}

    def _note_other_policies(self, committed: list[TopicPartition]) -> None:
        """Say which partitions' last committed batch another policy revision decided (the
        revision each processor puts in its offsets' metadata, checkpoint.py): one line per
        revision, and ``ledger_partitions_from_other_policy_total{revision}``. Expected once
        per partition in a rolling policy change; a processor of the group still on other
        settings makes it come back at every rebalance. Nothing stops: the state is the
        same whichever policy decided it."""
        own = self._policy.revision
        others: dict[str, set[int]] = defaultdict(set)
        for tp in committed:
            if tp.metadata and tp.metadata != own and REVISION.fullmatch(tp.metadata):
                others[tp.metadata].add(tp.partition)
        for revision, partitions in sorted(others.items()):
            metrics.OTHER_POLICY.labels(revision).inc(len(partitions))
            logger.warning("partitions last decided under another policy revision",
                           extra=log_fields(partitions=sorted(partitions), revision=revision,
                                            policy_revision=own))
