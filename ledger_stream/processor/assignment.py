"""The partitions this processor owns, as the consumer group's rebalance callbacks change
them. Eager (range) rebalancing: everything is revoked, then a new set assigned.

On assignment, for each state partition p (intents-p and attempts-p must come together, or
p is refused): read the group's committed offsets (read_committed, so a transaction still
holding offsets for p is waited for), open p's store, catch it up from the changelog, and
only then let the consumer read p from the committed offsets. On revocation (or loss) the
stores are closed: the callbacks run only inside ``poll``, between batches, so no batch is
ever half-applied to a store that is closing.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition

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
RESTORE_ATTEMPTS = 8  # a broker restart can take a minute here: wait it out, then give up


class Assignment:
    def __init__(self, open_store: Callable[[int], PartitionStore], restorer: Consumer,
                 policy: Policy, topics: tuple[str, str], changelog_topic: str,
                 group: str) -> None:
        self._open_store = open_store
        self._restorer = restorer
        self._policy = policy
        self.topics = topics  # (intents, attempts)
        self._changelog = changelog_topic
        self._group = group
        self.stores: dict[int, PartitionStore] = {}
        self.committed: dict[int, Positions] = {}
        self.epoch = 0  # counts rebalance callbacks: records polled across one are stale

    @property
    def owned(self) -> list[int]:
        return sorted(self.stores)

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.epoch += 1
        accepted = self._co_partitioned(partitions)
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
        consumer.assign(assigned)
        # A partition paused while the group moved on (the runtime pauses everything while
        # it waits for a rebalance) stays paused across reassignment unless resumed.
        if assigned:
            consumer.resume(assigned)
        logger.info("partitions assigned", extra=log_fields(
            partitions=accepted, restore_seconds=round(time.monotonic() - started, 3),
            changelog_seconds=round(stats.seconds, 3),
            restored_records=stats.applied, skipped_records=stats.skipped))

    def _restore(self, stores: dict[int, PartitionStore], committed: dict[int, Positions]
                 ) -> RestoreStats:
        """Restore with a few retries; a partition that cannot be restored must not be
        decided, so the last failure ends the process (ProcessorError)."""
        for attempt in range(1, RESTORE_ATTEMPTS + 1):
            try:
                return restore_partitions(self._restorer, self._changelog, stores, committed,
                                          self._group, self._policy)
            except ProcessorError as exc:
                if attempt == RESTORE_ATTEMPTS:
                    raise
                logger.warning("restore failed; retrying", extra=log_fields(
                    partitions=sorted(stores), attempt=attempt, error=str(exc)))
                time.sleep(min(attempt, 5))
        raise AssertionError("unreachable")

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(partitions, "partitions revoked")

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(partitions, "partitions lost (session expired): their uncommitted "
                      "batch, if any, was abandoned")

    def _release(self, partitions: list[TopicPartition], what: str) -> None:
        self.epoch += 1
        released = sorted({tp.partition for tp in partitions} & set(self.stores))
        for partition in released:
            self.stores.pop(partition).close()
            self.committed.pop(partition, None)
            with contextlib.suppress(KeyError):
                metrics.CLOCK_LAG.remove(str(partition))
        if released:
            logger.info(what, extra=log_fields(partitions=released))

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.stores.clear()

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
        try:
            found = consumer.committed(wanted, timeout=COMMITTED_TIMEOUT_S)
        except KafkaException as exc:
            raise ProcessorError(f"reading committed offsets failed: {exc.args[0].str()}"
                                 ) from exc
        offsets = {(tp.topic, tp.partition): tp.offset for tp in found}
        intents, attempts = self.topics
        return {p: Positions(max(offsets[(intents, p)], -1), max(offsets[(attempts, p)], -1))
                for p in partitions}
