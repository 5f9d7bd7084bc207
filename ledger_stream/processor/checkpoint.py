"""The checkpoint: how one batch becomes durable, in the order that makes a crash at any
point safe (docs/design.md, 'Checkpoint order'). The steps, and the code below follows them:

a. Decide every record of the batch against an in-memory overlay of its partition's store
   (:class:`~ledger_stream.processor.batch.Batch`). Nothing is written anywhere.
b. Produce the outputs (dispatch, receipts, alerts, dlq; encoded by the step), the Ticks,
   and the changelog records (one per changed key, its row; one for the partition clock;
   headers naming the batch's input positions), then confirm them: at least once, every
   delivery report is a success; exactly once, they are flushed inside the transaction.
   Failpoints ``processor_after_produce`` (handed to the producer, not confirmed) and
   ``processor_after_flush`` (confirmed; offsets / transaction not committed).
c. Commit the input offsets: at least once, ``consumer.commit`` (synchronous); exactly
   once, ``send_offsets_to_transaction`` with the group metadata of the generation that
   polled the records, then ``commit_transaction``. Failpoint ``processor_after_commit``.
d. Only then write each partition's overlay to its local store, in one write per
   partition: rows, timer index changes, clock, and the changelog offset it reflects:
   the one reported (exactly once), else a lower bound, the store's offset plus the
   changelog records this batch wrote there (at least once reports failures only). Each of
   them took an offset of its own past every earlier batch's, so the true next offset is
   at least that; other writers (a zombie, a retry) only push it further. Restore reads
   from the stored offset: from below the true one it applies committed records the store
   holds already, which leaves the same state.

A failure in a, b or c raises BatchAbandoned: the caller aborts, discards the overlays and
reads the inputs again from the committed offsets, whose decisions reproduce the same
bytes. One failure in c leaves the outcome unknown: a commit given up on whose producer is
replaced may still have gone through (the coordinator had begun it; the new producer's
``init_transactions`` completes it). Deciding the batch again would then write each of its
outputs twice, so the caller first asks the group (:meth:`Checkpoint.recover`): a batch
that did commit is finished with step d, with the lower bound, as committed. A crash after
c leaves the store behind its changelog, which restore catches up. A crash anywhere else
leaves records of an uncommitted batch, which restore skips (at least once: they are
duplicates of what the retried batch writes; exactly once: aborted).
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import Consumer

from ledger_stream.failpoints import failpoint, reached
from ledger_stream.logs import log_fields
from ledger_stream.processor import changelog
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.delivery import Delivery
from ledger_stream.processor.exceptions import BatchAbandoned, ProcessorError
from ledger_stream.processor.outcome import BACKOFF_FIRST_S, BACKOFF_MAX_S, committed_through
from ledger_stream.processor.stages import BatchClock
from ledger_stream.processor.step import LedgerStep
from ledger_stream.state import StoreError

logger = logging.getLogger(__name__)


class Checkpoint:
    def __init__(self, delivery: Delivery, consumer: Consumer, step: LedgerStep,
                 topics: dict[str, str], group: str, instance: str,
                 incremental: bool = False) -> None:
        """``topics`` maps roles ("dispatch", ..., "attempts", "changelog") to names;
        ``incremental``: the group uses the consumer protocol (KIP-848)."""
        self.delivery = delivery
        self._incremental = incremental
        self._consumer = consumer
        self._step = step
        self._topics = topics
        self._group = group
        self._instance = instance
        self.clock = BatchClock()  # the runtime starts it as a batch's poll begins
        # A batch whose commit began (step c) and did not return, with the changelog
        # records it wrote per partition: only such a batch's outcome can be unknown.
        self._committing: tuple[Batch, dict[int, int]] | None = None

    def run(self, batch: Batch) -> None:
        """Steps b, c and d for a batch that went through step a."""
        lap = self.clock.lap
        written = self._produce(batch)
        lap("produce")
        failpoint("processor_after_produce")
        changelog_next = self.delivery.confirm()
        lap("flush")
        failpoint("processor_after_flush")
        self._committing = batch, written
        if reached("processor_commit_unknown_before"):
            raise BatchAbandoned("producer_wedged", "failpoint: commit never called",
                                 new_producer=True)
        try:
            self._commit(batch)
        except BatchAbandoned as why:
            if why.kind == "fenced":
                # The group refused the batch's offsets (or this member left it before the
                # commit): nothing of it committed, and the group's offsets may be another
                # member's, equal to this batch's. Its outcome is known.
                self._committing = None
            raise
        if reached("processor_commit_unknown_after"):
            raise BatchAbandoned("producer_wedged", "failpoint: commit returned",
                                 new_producer=True)
        self._committing = None
        lap("commit")
        failpoint("processor_after_commit")
        self._store(batch, written, changelog_next)
        lap("store")

    def recover(self, batch: Batch, stop: threading.Event) -> bool:
        """After ``batch`` was abandoned with an unusable producer: replace it (retrying
        while not ``stop``), then learn whether the batch committed after all. True when
        it did: its overlays are then in the stores (step d) and the caller counts it
        committed and reads on. False when it did not, when its commit never began, or when
        ``stop`` came first (the outcome stays unknown: a restart reads from the committed
        offsets and restores from the changelog, correct either way)."""
        committing, self._committing = self._committing, None
        if not self._replace_producer(stop) or committing is None or committing[0] is not batch:
            return False
        written = committing[1]
        # The new producer's init_transactions returned: the old transaction is resolved.
        if not committed_through(self._consumer,
                                 batch.offsets(self._step.policy.revision), stop):
            return False
        logger.warning("the abandoned batch committed after all: its outputs stay as "
                       "written, its state is kept", extra=log_fields(
                           records=batch.records, partitions=sorted(batch.overlays)))
        try:
            self._store(batch, written, {})  # no report is known: the lower bound
        except StoreError as exc:
            raise ProcessorError(f"state store failed after a commit: {exc}") from exc
        return True

    def _replace_producer(self, stop: threading.Event) -> bool:
        delay = BACKOFF_FIRST_S
        while not stop.is_set():
            try:
                self.delivery.replace_producer()
                return True
            except BatchAbandoned as why:
                logger.warning("new producer failed; retrying", extra=log_fields(
                    error=why.reason, retry_s=delay))
                stop.wait(delay)
                delay = min(BACKOFF_MAX_S, delay * 2)
        return False

    @staticmethod
    def _store(batch: Batch, written: dict[int, int], changelog_next: dict[int, int]) -> None:
        """Step d: each changed overlay to its store, with the changelog offset it reflects
        (reported, else the lower bound)."""
        for partition, overlay in batch.overlays.items():
            if overlay.changed:
                reflected = changelog_next.get(partition)
                if reflected is None:  # not reported: the lower bound (see step d)
                    reflected = overlay.store.changelog_offset + written.get(partition, 0)
                overlay.store.write(overlay.store_batch(reflected))

    def _produce(self, batch: Batch) -> dict[int, int]:
        """Hand the batch's records to the producer; the changelog records per partition."""
        topics = self._topics
        self.delivery.begin()
        self.delivery.send_all(  # unpacked: five field reads per output cost more
            (topics[role], value, key, partition, list(headers) if headers else None)
            for role, key, value, headers, partition in batch.outputs)
        wall_ms = int(time.time() * 1000)
        for partition in batch.ticks:
            self.delivery.send(
                topics["attempts"], self._step.encode_tick(partition, self._instance, wall_ms),
                changelog.TICK_KEY, partition)
        written: dict[int, int] = {}
        for partition, overlay in batch.overlays.items():
            records = changelog.records(self._group, batch.positions(partition), overlay)
            self.delivery.send_changelog(topics["changelog"], partition, records)
            written[partition] = len(records)
        return written

    def _commit(self, batch: Batch) -> None:
        # The offsets name the policy revision that decided the batch: the processor that
        # takes the partition next says so when its own differs (assignment.py).
        offsets = batch.offsets(self._step.policy.revision)
        if offsets and (not batch.member or self._consumer.memberid() != batch.member):
            # The consumer left or rejoined the group since it polled these records: their
            # partitions may belong to another member now. (The broker would refuse the
            # commit too; this saves the round trip.)
            raise BatchAbandoned("fenced", "fenced: this member left the group during the "
                                 "batch", await_rebalance=True)
        metadata = batch.group_metadata
        if self._incremental and offsets:
            # KIP-848: the member epoch moves with every change of the group's assignment,
            # carried by heartbeats without a callback, so the epoch of the poll may be gone
            # by now. The current one is as safe: no partition leaves this member before a
            # poll serves its callback, and a fenced member cannot rejoin before then.
            metadata = self._consumer.consumer_group_metadata()
        self.delivery.commit(offsets, metadata)
