"""The processor on quixstreams: the single writer per operation key.

``ledger.intents`` and ``ledger.attempts`` are concatenated before the one stateful step,
so both topics share one RocksDB store per partition (backed by a changelog topic) and one
key's events are decided in partition order by one process. Outputs are produced to
``ledger.dispatch``, ``ledger.receipts``, ``ledger.alerts`` and ``ledger.dlq`` through the
checkpoint's producer, so with ``exactly-once`` they commit atomically with the offsets and
the changelog; with ``at-least-once`` (the default) a crash replays from the last checkpoint
and the deterministic decisions reproduce the same bytes.
"""

from __future__ import annotations

import logging
from typing import Any

from quixstreams import Application, message_context
from quixstreams.models.serializers import Serializer

from ledger_stream.config import Settings
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.bootstrap import resolve_bootstrap
from ledger_stream.processor.step import LedgerStep, Out
from ledger_stream.serde import AvroCodec, make_codec

logger = logging.getLogger(__name__)

OUTPUT_TOPICS = ("dispatch", "receipts", "alerts", "dlq")


class _OutValue(Serializer):
    """Outputs are encoded by the step already; the serializer just takes the bytes."""

    def __call__(self, value: Out, ctx: Any) -> bytes:
        return value.value


def policy_from(settings: Settings) -> Policy:
    return Policy(
        replay_window_ms=settings.replay_window_ms,
        approval_secret=settings.approval_secret.get_secret_value().encode(),
        approval_required_actions=frozenset(settings.approval_required_actions),
        retry_backoff_ms=settings.retry_backoff_ms,
        max_attempts=settings.max_attempts,
    )


def build_application(settings: Settings, codec: AvroCodec | None = None) -> Application:
    """The configured quixstreams Application with the ledger pipeline registered."""
    app = Application(
        broker_address=resolve_bootstrap(settings),
        consumer_group=settings.consumer_group,
        auto_offset_reset="earliest",
        commit_interval=settings.commit_interval_s,
        state_dir=str(settings.resolved_state_dir),
        processing_guarantee=settings.processing_guarantee,
        producer_extra_config={"partitioner": "murmur2_random"},
        consumer_extra_config={
            "session.timeout.ms": settings.session_timeout_ms,
            "heartbeat.interval.ms": max(1_000, settings.session_timeout_ms // 5),
            # librdkafka's default long poll (500 ms) queues every watermark and metadata
            # request behind it: restarts took 20 s to the first decision.
            "fetch.wait.max.ms": 50,
        },
        # Two input topics make quixstreams read in buffered batches that wait the whole
        # poll timeout for a full batch: with the default 1 s, that second was the latency.
        consumer_poll_timeout=0.05,
        loglevel="WARNING",
        auto_create_topics=True,
    )
    inputs = {settings.topic("intents"): "intents", settings.topic("attempts"): "attempts"}
    in_topics = [
        app.topic(name, value_deserializer="bytes", key_deserializer="bytes")
        for name in inputs
    ]
    out_topics = {
        role: app.topic(settings.topic(role), value_serializer=_OutValue(),
                        key_serializer="bytes", value_deserializer="bytes")
        for role in OUTPUT_TOPICS
    }
    step = LedgerStep(policy_from(settings), codec or make_codec(settings.schema_registry_url),
                      inputs)

    def process(value: bytes, key: bytes | None, timestamp: int, headers: Any,
                state: Any) -> list[Out]:
        ctx = message_context()
        return step.handle(value, key, ctx.topic, ctx.partition, ctx.offset, timestamp,
                           state)

    sdf = app.dataframe(in_topics[0]).concat(app.dataframe(in_topics[1]))
    sdf = sdf.apply(process, stateful=True, expand=True, metadata=True)
    sdf.to_topic(lambda out, *_: out_topics[out.topic], key=lambda out: out.key)
    return app


def run_processor(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT; quixstreams then commits the checkpoint and closes."""
    app = build_application(settings)
    logger.info("processor starting", extra={"fields": {
        "group": settings.consumer_group, "guarantee": settings.processing_guarantee,
        "state_dir": str(settings.resolved_state_dir)}})
    app.run()
