"""At least once: how a batch's records reach Kafka and its input offsets are committed
(steps b and c of the checkpoint, see checkpoint.py) without transactions.

No record may have failed before the offsets are committed synchronously; a produce failure
is never taken as acknowledged. librdkafka reports only the failures
(``delivery.report.only.error``: no Python call per record delivered), and ``flush``
returns only once every record is delivered or its failure served, so a lost record
abandons the batch before its commit. The changelog offsets are then not reported: the
checkpoint stores a lower bound instead (see checkpoint.py). It does not fence a zombie: a
stale batch's records are on the topics before its commit fails.
"""

from __future__ import annotations

import contextlib
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from ledger_stream.kafka.clients import Consumer
from ledger_stream.processor.delivery import FLUSH_TIMEOUT_S, Delivery
from ledger_stream.processor.kafka_calls import STALE_EPOCH, classify


class AtLeastOnceDelivery(Delivery):
    def __init__(self, config: dict[str, Any], changelog_topic: str, consumer: Consumer):
        # Failures only: a success report is a Python call per record, and what it carries
        # (the changelog offsets) has a lower bound that needs none (checkpoint.py).
        super().__init__({**config, "delivery.report.only.error": True}, changelog_topic)
        self._consumer = consumer

    def commit(self, offsets: list[TopicPartition], group_metadata: Any) -> None:
        if not offsets:
            return
        for attempt in (1, 2):
            try:
                self._consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException as exc:
                # KIP-848: the epoch moved while the commit was on its way; the client sends
                # its current one on a retry, and no partition left this member meanwhile
                # (that needs a poll), so committing again is safe.
                if attempt == 1 and exc.args[0].code() == STALE_EPOCH:
                    continue
                raise classify(exc, "commit") from exc

    def abort(self) -> None:
        # Records already sent stay sent (this guarantee cannot recall them); wait for
        # their reports so they are not counted against the next batch.
        with contextlib.suppress(KafkaException):
            self._producer.flush(self._within(FLUSH_TIMEOUT_S))
        self.begin_reports()
