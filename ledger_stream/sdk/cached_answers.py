"""A duplicate answered from the client's receipt cache (receipt_cache.py), its intent still
recorded.

The answer is given at once; the intent is produced for the record (and the ledger's alerts)
without waiting for Kafka's acknowledgement. Never silently lost: a refused delivery is logged,
and its key leaves the cache; intents still unacknowledged when the client goes away (closed
or not) are waited for, and each one left is logged. A cached answer and the client's
``close`` never overlap: an intent answered before ``close`` is in the producer's queue when
``close`` flushes it, and a cached answer asked for after it is refused (RuntimeError).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager

from confluent_kafka import KafkaError

from ledger_stream import tracing
from ledger_stream.domain import events as ev
from ledger_stream.failpoints import failpoint
from ledger_stream.kafka.exceptions import DeliveryFailed
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.logs import log_fields
from ledger_stream.sdk.follow import answered, span_attributes
from ledger_stream.sdk.receipt_cache import ReceiptCache
from ledger_stream.serde import AvroCodec

logger = logging.getLogger(__name__)


class CachedAnswers:
    """The cache's answers for one client, and the intents they still have to record."""

    def __init__(self, cache: ReceiptCache, producer: EventProducer, codec: AvroCodec,
                 timeout_s: float) -> None:
        self.cache = cache
        self._codec = codec
        # Intents answered from the cache, not acknowledged yet (event id: key). A process
        # that ends without close() would drop them in librdkafka's queue unseen: at exit
        # (or when the client is collected) they are waited for, and the rest logged.
        self.unacked: dict[str, str] = {}
        weakref.finalize(self, _unrecorded_at_exit, producer, self.unacked, timeout_s)
        # The barrier between cached answers and close(): an answer counts itself in under
        # the gate (refused once closed) and out once its intent is in the producer's queue;
        # close waits for the count to reach zero. Answers never wait for each other (one
        # lock held across each whole answer serialized 64 agents' answers: 6.7 ms p50),
        # and none waits on Kafka (the produce does not wait for room). Not the client's
        # lock: that one is held across Kafka's waits.
        self._gate = threading.Condition(threading.Lock())
        self._answering = 0
        self._closed = False

    def close(self) -> None:
        """Refuse every cached answer from now on; returns once none is being produced (the
        intents answered so far are in the producer's queue, for its close to flush)."""
        with self._gate:
            self._closed = True
            self._gate.wait_for(lambda: self._answering == 0)

    def answer(self, intent: ev.Intent, producer: EventProducer,
               reaching: Callable[[str], AbstractContextManager[None]]) -> ev.Receipt | None:
        """The receipt cache's answer to ``intent``, its intent produced for the record by
        ``producer`` (the client's) without waiting; None when the ledger must answer.
        ``reaching`` turns Kafka's errors into the client's (LedgerClient._reaching).
        RuntimeError once ``close`` began."""
        gate = self._gate
        with gate:
            if self._closed:  # as a submit to the ledger would say (its producer is gone)
                raise RuntimeError("the LedgerClient is closed")
            self._answering += 1
        try:
            return self._answer(intent, producer, reaching)
        finally:
            with gate:
                self._answering -= 1
                if not self._answering:
                    gate.notify_all()

    def _answer(self, intent: ev.Intent, producer: EventProducer,
                reaching: Callable[[str], AbstractContextManager[None]]) -> ev.Receipt | None:
        cache = self.cache
        receipt = cache.answer(intent)
        if receipt is None:
            return None

        unacked = self.unacked

        def report(error: KafkaError | None, _msg: object) -> None:
            unacked.pop(intent.event_id, None)
            if error is not None:  # never silent: logged, listed, and the key asks again
                why = f"{intent.key} {intent.event_id}: {error.str()}"
                logger.error("intent answered from the receipt cache not recorded",
                             extra=log_fields(key=intent.key, event_id=intent.event_id,
                                              err=error.str()))
                cache.forget(intent.key, why)

        with tracing.span(f"ledger.submit {intent.action}", kind="producer",
                          attributes={**span_attributes(intent),
                                      "ledger.receipt.cached": "true"}) as span:
            failpoint("before_intent")
            with reaching(f"record the intent for {intent.key}"):
                # Before the produce: its report (served by any later poll) removes it.
                unacked[intent.event_id] = intent.key
                try:
                    producer.send_raw("intents", intent.key.encode("utf-8"),
                                      self._codec.encode(intent),
                                      headers=tracing.current_headers(),
                                      on_delivery=report, wait_for_room=False)
                except BufferError:
                    # The producer's queue is full (Kafka slow or gone): waiting for room
                    # here would block an event loop (the async client answers from the
                    # cache on it); the ledger's path waits off the loop, and reports.
                    unacked.pop(intent.event_id, None)
                    return None
                except BaseException:
                    # Not queued, and its caller gets the error, not an answer: nothing to
                    # wait for, and nothing to log as answered but not recorded.
                    unacked.pop(intent.event_id, None)
                    raise
            cache.count_hit()
            answered(span, receipt, {})
        return receipt


def _unrecorded_at_exit(producer: EventProducer, unacked: dict[str, str],
                        timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for the intents answered from the receipt cache that Kafka
    has not acknowledged yet; log each one still not acknowledged as not recorded (their
    callers were answered, so only this line says the ledger never saw them)."""
    if not unacked:
        return
    with contextlib.suppress(DeliveryFailed, RuntimeError):  # each one left is logged below
        producer.flush(timeout_s)  # serves the delivery reports, refusals logged by them
    for event_id, key in list(unacked.items()):
        logger.error("intent answered from the receipt cache not recorded", extra=log_fields(
            key=key, event_id=event_id,
            err=f"not acknowledged within {timeout_s:g} s before the client went away"))
