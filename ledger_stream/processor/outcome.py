"""Whether a batch whose commit's outcome is unknown did commit: asked of the group.

A transaction's commit can go through although its producer was given up on: the commit
timed out or never returned, the runtime replaced the producer, and the coordinator had
already written PrepareCommit, so the new producer's ``init_transactions`` completes it
instead of aborting it. Once that call has returned, the old transaction is resolved
(committed or aborted, its offsets with it), and the group's committed offsets say which:
they equal the batch's exactly when its commit went through (the offsets are committed in
the transaction, atomically with its records).

The consumer reads with ``isolation.level=read_committed``, and librdkafka then sends its
OffsetFetch with ``require_stable`` (KIP-447): the broker answers UNSTABLE_OFFSET_COMMIT
while a transaction with offsets for the partition is pending, and librdkafka retries that
until the call's timeout. So an answer is never a pending offset, only a settled one.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ledger_stream.logs import log_fields

logger = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 5.0  # inside the stop bound (runtime.STOP_CALLS_S) with a replacement
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.5, 10.0


def committed_through(consumer: Consumer, offsets: list[TopicPartition],
                      stop: threading.Event) -> bool | None:
    """Whether the group's committed offsets are ``offsets`` (the batch committed), asked
    until the broker answers: None only when ``stop`` was set first (the outcome stays
    unknown; a restart reads from the committed offsets and restores from the changelog,
    correct either way). A batch without offsets cannot tell: False.

    No guess on a failed fetch: the coordinator that did not answer is the one any next
    commit needs too, so waiting for it costs nothing the processor could do meanwhile."""
    if not offsets:
        return False
    wanted = {(tp.topic, tp.partition): tp.offset for tp in offsets}
    delay = BACKOFF_FIRST_S
    while not stop.is_set():
        try:
            found = consumer.committed(
                [TopicPartition(topic, partition) for topic, partition in wanted],
                timeout=FETCH_TIMEOUT_S)
            failed = [tp for tp in found if tp.error]
            if not failed:
                return {(tp.topic, tp.partition): tp.offset for tp in found} == wanted
            error = str(failed[0].error)
        except KafkaException as exc:
            error = exc.args[0].str()
        logger.warning("cannot learn whether the abandoned batch committed; retrying",
                       extra=log_fields(error=error, retry_s=delay))
        stop.wait(delay)
        delay = min(BACKOFF_MAX_S, delay * 2)
    return None
