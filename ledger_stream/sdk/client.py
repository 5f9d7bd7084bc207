"""The agent-side client: bind an effect to its operation key and wait for the ledger.

``submit`` produces the intent (murmur2 partitioner, idempotent producer, acknowledged
before it returns) and returns the key's terminal receipt, or the current pending one when
``wait`` runs out. Every submit of a client shares one receipts subscription
(``receipt_hub.ReceiptHub``): no consumer is created per call. Submitting the same intent
again, from any process, any number of times, never causes a second effect: the ledger answers
with the original outcome.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from pydantic import SecretStr

from ledger_stream import tracing
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json, reserved_tenant, tenant_of
from ledger_stream.domain.validation import invalid_reason
from ledger_stream.failpoints import failpoint
from ledger_stream.history import Located, TimelineRow, evidence, read_key, timeline
from ledger_stream.kafka.bootstrap import resolve_bootstrap
from ledger_stream.kafka.client_config import CLIENT_CONFIG, use_client_settings
from ledger_stream.kafka.end_offsets import EndOffsets
from ledger_stream.kafka.exceptions import DeliveryFailed, KafkaSetupError, kafka_error_text
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import key_receipts
from ledger_stream.sdk import dry_run
from ledger_stream.sdk.cached_answers import CachedAnswers
from ledger_stream.sdk.errors import (
    InvalidIntentError,
    LedgerUnavailable,
    NoTimelineError,
    raise_for,
)
from ledger_stream.sdk.follow import PENDING as PENDING
from ledger_stream.sdk.follow import Follow as _Follow
from ledger_stream.sdk.follow import answered as _answered
from ledger_stream.sdk.follow import span_attributes as _span_attributes
from ledger_stream.sdk.receipt_cache import ReceiptCache
from ledger_stream.sdk.receipt_hub import AsyncReceiptWaiter, ReceiptHub
from ledger_stream.sdk.view_client import ViewClient
from ledger_stream.serde import AvroCodec, make_codec
from ledger_stream.state.rows import row_texts_too_large

# Kafka's own waits inside a submit (the intent's acknowledgement, a partition's first end
# offset) are bounded by what is left of ``wait``, get at least this much, and never more
# than their own limits (a long wait must not hold the receipts' assignment lock longer).
KAFKA_WAIT_FLOOR_S = 0.5
ACK_WAIT_MAX_S = 30.0
END_OFFSET_WAIT_MAX_S = 15.0
_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE})  # raised by produce() itself


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def now_ms() -> int:
    return int(time.time() * 1000)


class LedgerClient:
    """Thread-safe. One per process is enough; ``close()`` when done."""

    def __init__(self, settings: Settings | None = None, *, bootstrap: str | None = None,
                 codec: AvroCodec | None = None) -> None:
        self.settings = settings or Settings()
        security = self.settings.kafka_client_properties()
        if security:  # the cluster's security settings (SASL, TLS), for every client
            use_client_settings(security)
        self.bootstrap = bootstrap or resolve_bootstrap(self.settings)
        self._codec = codec or make_codec(self.settings.connection.schema_registry_url)
        # No linger: an agent waits for each intent's acknowledgement, one at a time, so
        # librdkafka's default 5 ms wait for a batch to fill was 5 ms added to every submit;
        # concurrent submits still share the requests that are in flight.
        self._producer = EventProducer(self.settings, self.bootstrap, self._codec,
                                       acks="all", **{"linger.ms": 0})
        self._receipts_topic = self.settings.topic("receipts")
        self._partitions: int | None = None
        self._lock = threading.Lock()
        self._hub: ReceiptHub | None = None
        self._view = ViewClient(self.settings.view.url, key=_secret(self.settings.view.key)) \
            if self.settings.view.url else None
        self._admin_client: AdminClient | None = None
        self._ends: EndOffsets | None = None
        self._closed = False
        self.receipt_cache = ReceiptCache.from_settings(self.settings)
        self._cached_answers = None if self.receipt_cache is None else CachedAnswers(
            self.receipt_cache, self._producer, self._codec, self.settings.connection.timeout_s)

    @property
    def codec(self) -> AvroCodec:
        """The codec this client reads and writes ledger events with."""
        return self._codec

    def intent(self, key: str, action: str, target: str, args: Any, *,
               workflow: ev.Workflow, payload: Any = None, approval: ev.Approval | None = None,
               policy_revision: str = "", origin: ev.Origin = ev.Origin.FRESH,
               observations: Sequence[ev.Observation] = ()) -> ev.Intent:
        """An Intent for ``key`` with canonical, hashed material arguments, carrying the
        ``observations`` its step made (evidence only: they never change the answer).

        Raises InvalidIntentError for an intent the ledger would dead-letter (a key that is
        not tenant/action/business-id, an action other than the key's), so the mistake
        shows here rather than as a missing receipt.
        """
        intent = ev.Intent(
            event_id=uuid.uuid4().hex, key=key, tenant=tenant_of(key), action=action,
            target=target, args_json=canonical_json(args), args_hash=args_hash(args),
            workflow=workflow, at_ms=now_ms(),
            payload_json=canonical_json(payload) if payload is not None else "",
            approval=approval, policy_revision=policy_revision, origin=origin,
            observations=tuple(observations),
        )
        _check(intent)
        return intent

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        """Produce ``intent`` and return the key's receipt once terminal, or the latest
        pending receipt after ``wait`` seconds. A duplicate of a key this client created
        and saw succeed is answered at once from its receipt cache (receipt_cache.py: the
        answer the ledger gives, its intent still produced; ``sdk_receipt_cache``).

        The receipt answers ``intent`` (its ``intent_event_id``, also when the key's later
        change it carries was written for the intent holding the key): ``state`` is the
        key's, ``answer`` what this intent got (created, already_done, rejected, held,
        pending), ``effect_intent_id`` the intent whose effect it is.

        Raises ConflictError, ApprovalError, ExpiredKeyError, VersionHeldError,
        NeedsReconciliation or EffectFailed for answers that mean "no" (unless
        ``raise_errors`` is False); TimeoutError if no answer at all came within ``wait``;
        LedgerUnavailable when Kafka cannot be reached or does not acknowledge the intent
        (within ``wait``, or half a second if less is left); InvalidIntentError for an
        intent the ledger would dead-letter (built by hand, or changed after ``intent``) or
        one too large for the topic; RuntimeError once the client is closed.
        """
        probe = dry_run.current()
        if probe is not None:  # a dry run: the probe answers, nothing is produced
            receipt = probe.answer(intent)
            return raise_for(receipt) if raise_errors else receipt
        dry_run.refuse_in_dry_run(intent)  # a process that must not write: before any wait
        _check(intent)
        cached = self._cached(intent)
        if cached is not None:
            return raise_for(cached) if raise_errors else cached
        deadline = time.monotonic() + wait
        with tracing.span(f"ledger.submit {intent.action}", kind="producer",
                          attributes=_span_attributes(intent)) as span:
            with self._reaching("submit"):
                waiter = self.receipts().follow(
                    intent.key, _kafka_wait(deadline, END_OFFSET_WAIT_MAX_S))
            try:
                self._produce(intent, tracing.current_headers(),
                              _kafka_wait(deadline, ACK_WAIT_MAX_S))
                follow = _Follow(intent)
                while not follow.done and (left := deadline - time.monotonic()) > 0:
                    follow.take(waiter.read_settled(left))
            finally:
                waiter.close()
            failpoint("after_receipt")
            receipt = follow.answer()
            _answered(span, receipt, waiter.traces)
        self._learn(intent, receipt)
        return raise_for(receipt) if raise_errors else receipt

    def _cached(self, intent: ev.Intent) -> ev.Receipt | None:
        """The receipt cache's answer to ``intent`` (cached_answers.py), its intent produced
        for the record without waiting; None when the ledger must answer."""
        if self._closed:  # as a submit to the ledger would say (its producer is gone)
            raise RuntimeError("the LedgerClient is closed")
        answers = self._cached_answers
        return None if answers is None else answers.answer(intent, self._producer, self._reaching)

    def _learn(self, intent: ev.Intent, receipt: ev.Receipt) -> None:
        if self.receipt_cache is not None:
            self.receipt_cache.learn(intent, receipt)

    def _produce(self, intent: ev.Intent, trace: tracing.Headers = (),
                 timeout_s: float = 30.0) -> None:
        dry_run.refuse_in_dry_run(intent)
        failpoint("before_intent")
        with self._reaching(f"record the intent for {intent.key}"):
            self._producer.deliver("intents", intent, trace, timeout_s=timeout_s)
        failpoint("after_intent")

    @contextmanager
    def _reaching(self, what: str) -> Iterator[None]:
        """Kafka's failures as LedgerUnavailable, naming the cluster and what was tried."""
        try:
            yield
        except DeliveryFailed as exc:
            raise LedgerUnavailable(
                f"cannot {what}: Kafka at {self.bootstrap} did not acknowledge it ({exc}); "
                "it may still be recorded, and submitting it again is safe") from exc
        except KafkaException as exc:
            if exc.args and isinstance(exc.args[0], KafkaError) \
                    and exc.args[0].code() in _TOO_LARGE:  # no retry would help
                raise InvalidIntentError(f"cannot {what}: the intent is larger than Kafka "
                                         f"accepts ({kafka_error_text(exc)})") from exc
            raise LedgerUnavailable(f"cannot {what}: Kafka at {self.bootstrap}: "
                                    f"{kafka_error_text(exc)}") from exc
        except KafkaSetupError as exc:
            raise LedgerUnavailable(f"cannot {what}: {exc}") from exc

    def receipts(self) -> ReceiptHub:
        """The client's receipts subscription (started on first use)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the LedgerClient is closed")
            if self._hub is None:
                partitions = self._partition_count_locked()
                # Its own EndOffsets on the shared admin: a request fails or waits for every
                # caller it covers, and a status() with a short wait must not cut a
                # submit's retries short, nor a submit's hold up a status() (hostile review).
                ends = EndOffsets(self._admin(), self._receipts_topic, partitions)
                self._hub = ReceiptHub(self.bootstrap, self._receipts_topic, self._codec,
                                       lambda key: partition_for(key, partitions), ends.get)
            return self._hub

    def status(self, key: str, wait: float = 2.0) -> ev.Receipt | None:
        """The key's latest receipt (its state is ``key_status``), or None if it has none.

        It reflects every receipt a read-committed reader could see when it began. With
        ``view_url`` set (LEDGER_VIEW_URL) one lookup in the receipts view answers, whatever
        the topic's size: the view first catches up to the key partition's end offset as of
        this call, and StaleStatusError says it could not within ``wait`` seconds
        (ViewUnavailableError: it could not be asked or refused). Without a view the key's
        partition is read to that end offset; LedgerUnavailable when it cannot be (no
        broker, or the partition's leader lost and not yet replaced after the client's
        15 s of retries).
        """
        if self._view is None:
            with self._reaching(f"read the receipts of {key}"):
                found = key_receipts(self.bootstrap, self._receipts_topic, key, self._codec)
            return found[-1] if found else None
        with self._reaching(f"read the end of the receipts of {key}"):
            partitions = self._partition_count()
            partition = partition_for(key, partitions)
            after = self._end_offsets().get(partition, patience_s=max(wait, 0.5))
        return self._view.status(key, after, wait, topic=self._receipts_topic,
                                 partition=partition, partitions=partitions)

    def timeline(self, key: str, wait: float = 2.0, limit: int = 1_000) -> list[TimelineRow]:
        """The key's timeline: one row per record of it in every ledger topic, the latest
        ``limit`` of them (``[]`` when the ledger has none). With ``view_url`` set, one
        lookup in the view's timeline, caught up to every record committed when this was
        called (StaleTimelineError: not within ``wait`` seconds; ViewUnavailableError);
        without (or a view with no timeline), the key's partition of every topic is read."""
        if limit < 1:
            raise ValueError(f"limit must be 1 or more, got {limit}")
        if self._view is not None:
            try:
                body = self._view.history(key, "timeline", wait, limit)
                return [TimelineRow(**row) for row in body["rows"]]
            except NoTimelineError:
                pass  # a view of latest receipts only: the topics answer
        return timeline(self._key_records(key))[-limit:]

    def evidence(self, key: str, wait: float = 2.0) -> dict[str, Any] | None:
        """Everything known about the key as one redacted JSON-able document
        (``history.evidence``), or None when the ledger has no record of it. From the view
        or the topics, as ``timeline``."""
        if self._view is not None:
            try:
                body = self._view.history(key, "evidence", wait)
                found: dict[str, Any] = body["evidence"]
                return found if body["records"] else None
            except NoTimelineError:
                pass
        records = self._key_records(key)
        return evidence(key, records, now_ms()) if records else None

    def _key_records(self, key: str) -> list[Located]:
        with self._reaching(f"read the records of {key}"):
            return read_key(self.bootstrap, self.settings, key, self._codec)

    def _partition_count(self) -> int:
        with self._lock:
            return self._partition_count_locked()

    def _end_offsets(self) -> EndOffsets:
        with self._lock:
            if self._ends is None:
                self._ends = EndOffsets(self._admin(), self._receipts_topic,
                                        self._partition_count_locked())
            return self._ends

    def _admin(self) -> AdminClient:
        if self._admin_client is None:
            self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap,
                                               **CLIENT_CONFIG})
        return self._admin_client

    def _partition_count_locked(self) -> int:
        if self._partitions is None:
            meta = self._admin().list_topics(self._receipts_topic,
                                             timeout=self.settings.connection.timeout_s)
            topic = meta.topics[self._receipts_topic]
            if topic.error is not None or not topic.partitions:
                # Not cached: the topic may exist on the next call.
                raise KafkaSetupError(f"{self._receipts_topic} is not available "
                                      f"({topic.error}): run `ledger-stream topics create`")
            self._partitions = len(topic.partitions)
        return self._partitions

    def close(self) -> None:
        """Flush what was produced and release the Kafka clients. Not usable afterwards
        (RuntimeError); closing again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            hub, self._hub = self._hub, None
        if self._cached_answers is not None:  # an answer being produced is queued first
            self._cached_answers.close()
        if hub is not None:
            hub.close()
        self._producer.close()

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check(intent: ev.Intent) -> None:
    """InvalidIntentError for an intent the processor would dead-letter (its caller would
    otherwise wait for an answer that never comes), or one of a tenant named as the ledger
    keys its own records (``reserved_tenant``: ``unmapped``, ``~...``, ``*``)."""
    problem = invalid_reason(intent, intent.key) or reserved_tenant(intent.tenant) \
        or row_texts_too_large(intent.args_json, intent.payload_json)
    if problem is not None:
        raise InvalidIntentError(f"{intent.key}: {problem}")


def _kafka_wait(deadline: float, most_s: float) -> float:
    """How long a Kafka request inside a submit may take: what is left of its wait, within
    [KAFKA_WAIT_FLOOR_S, most_s]."""
    return min(max(deadline - time.monotonic(), KAFKA_WAIT_FLOOR_S), most_s)


async def _follow_async(hub: ReceiptHub, key: str, loop: asyncio.AbstractEventLoop,
                        patience_s: float) -> AsyncReceiptWaiter:
    """A waiter registered in a worker thread; one whose caller was cancelled meanwhile is
    closed once registered, not left collecting the key's receipts for no one."""
    registering = loop.run_in_executor(None, hub.follow_async, key, loop, patience_s)
    try:
        return await asyncio.shield(registering)
    except asyncio.CancelledError:
        registering.add_done_callback(_close_registered)
        raise


def _close_registered(registering: asyncio.Future[AsyncReceiptWaiter]) -> None:
    if not registering.cancelled() and registering.exception() is None:
        registering.result().close()


class AsyncLedgerClient:
    """The same API for asyncio code. Waiting for receipts is native (the client's one
    receipts subscription delivers into the event loop); only producing the intent and its
    acknowledgement, and ``status``, run in a worker thread.
    """

    def __init__(self, settings: Settings | None = None, **kwargs: Any) -> None:
        self._client = LedgerClient(settings, **kwargs)

    @property
    def client(self) -> LedgerClient:
        """The synchronous client underneath (one receipts subscription for both)."""
        return self._client

    def intent(self, *args: Any, **kwargs: Any) -> ev.Intent:
        return self._client.intent(*args, **kwargs)

    async def submit(self, intent: ev.Intent, wait: float = 30.0, *,
                     raise_errors: bool = True) -> ev.Receipt:
        """As ``LedgerClient.submit``."""
        probe = dry_run.current()
        if probe is not None:  # a dry run: the probe answers, nothing is produced
            receipt = probe.answer(intent)
            return raise_for(receipt) if raise_errors else receipt
        dry_run.refuse_in_dry_run(intent)
        _check(intent)
        cached = self._client._cached(intent)
        if cached is not None:
            return raise_for(cached) if raise_errors else cached
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        kafka_wait = time.monotonic() + wait  # the same deadline, on the clock _kafka_wait reads
        with tracing.span(f"ledger.submit {intent.action}", kind="producer",
                          attributes=_span_attributes(intent)) as span:
            with self._client._reaching("submit"):
                hub = await asyncio.to_thread(self._client.receipts)
                waiter = await _follow_async(hub, intent.key, loop,
                                             _kafka_wait(kafka_wait, END_OFFSET_WAIT_MAX_S))
            try:
                await asyncio.to_thread(self._client._produce, intent,
                                        tracing.current_headers(),
                                        _kafka_wait(kafka_wait, ACK_WAIT_MAX_S))
                follow = _Follow(intent)
                while not follow.done and (left := deadline - loop.time()) > 0:
                    follow.take(await waiter.read_async(left))
            finally:
                waiter.close()
            failpoint("after_receipt")
            receipt = follow.answer()
            _answered(span, receipt, waiter.traces)
        self._client._learn(intent, receipt)
        return raise_for(receipt) if raise_errors else receipt

    async def status(self, key: str, wait: float = 2.0) -> ev.Receipt | None:
        """As ``LedgerClient.status``."""
        return await asyncio.to_thread(self._client.status, key, wait)

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)

