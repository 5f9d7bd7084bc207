"""The ledger's Kafka clients raise what really went wrong, never a SystemError.

confluent-kafka hands a fatal error, or an exception raised by one of our callbacks, to
Python while it serves callbacks; a log line queued behind it then reaches our logger with
the exception still set, and Python raises SystemError instead (kafka/clients.py). These
tests make librdkafka log a great deal (``debug``), so log lines do queue behind the error,
on a real broker."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer, Producer, unmasked
from ledger_stream.processor.delivery import ExactlyOnceDelivery
from ledger_stream.processor.exceptions import BatchAbandoned

# Many log lines per request, all through our logger (the processor's setting).
CHATTY = {**CLIENT_CONFIG, "debug": "eos,protocol,msg,broker", "log_level": 7}


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = f"clients-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


@pytest.fixture
def librdkafka_debug() -> Iterator[None]:
    """Our logger takes librdkafka's debug lines (and drops them: only the calls count)."""
    logger = logging.getLogger("librdkafka")
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield
    finally:
        logger.setLevel(level)
        logger.propagate = propagate


def fence(bootstrap: str, transactional_id: str) -> None:
    """A newer instance with the same transactional id: the older one is fenced."""
    newer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                      "transactional.id": transactional_id})
    newer.init_transactions(30)
    newer.flush(5)


@pytest.mark.kafka
def test_a_fenced_producer_raises_the_fatal_kafka_error(kafka_bootstrap: str, topic: str,
                                                         librdkafka_debug: None) -> None:
    """Fails with the plain confluent_kafka.Producer: SystemError (checked, 2026-12-03)."""
    tid = uuid.uuid4().hex
    producer = Producer({**CHATTY, "bootstrap.servers": kafka_bootstrap,
                         "transactional.id": tid, "linger.ms": 20})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"first")
    assert producer.flush(30) == 0
    fence(kafka_bootstrap, tid)
    producer.produce(topic, b"second")
    with pytest.raises(KafkaException) as raised:
        producer.flush(30)
    error = raised.value.args[0]
    assert error.fatal() and error.code() == KafkaError._FENCED


@pytest.mark.kafka
def test_a_fenced_transaction_abandons_the_batch_for_a_new_producer(
        kafka_bootstrap: str, topic: str, librdkafka_debug: None) -> None:
    """What the processor met in CI: a producer fenced mid-batch (by a wedged predecessor's
    late epoch bump). The batch is abandoned for a new producer; the process goes on."""
    tid = uuid.uuid4().hex
    delivery = ExactlyOnceDelivery({**CHATTY, "bootstrap.servers": kafka_bootstrap,
                                    "transactional.id": tid, "linger.ms": 20}, topic)
    try:
        delivery.begin()
        delivery.send(topic, b"first", None)
        delivery.confirm()
        fence(kafka_bootstrap, tid)
        delivery.send(topic, b"second", None)
        with pytest.raises(BatchAbandoned) as abandoned:
            delivery.confirm()
        assert abandoned.value.new_producer, abandoned.value.reason
        assert "fenced" in abandoned.value.reason
    finally:
        delivery.close()


class CallbackFailed(Exception):
    pass


@pytest.mark.kafka
def test_a_rebalance_callback_that_raises_is_raised_from_poll(
        kafka_bootstrap: str, topic: str, librdkafka_debug: None) -> None:
    """Our callback's own exception comes out of poll (the processor's assignment callbacks
    raise ProcessorError to stop it). The plain client passes this too as of 2.16: a
    consumer's poll stops serving at once; the wrapper is there for its fatal errors."""
    consumer = Consumer({**CHATTY, "debug": "cgrp,protocol", "bootstrap.servers": kafka_bootstrap,
                         "group.id": f"clients-{uuid.uuid4().hex}"})

    def on_assign(_: object, partitions: list[object]) -> None:
        raise CallbackFailed(f"refused {len(partitions)} partition(s)")

    consumer.subscribe([topic], on_assign=on_assign)
    try:
        with pytest.raises(CallbackFailed, match="refused 1 partition"):
            for _ in range(300):
                consumer.poll(0.1)
    finally:
        consumer.close()


def test_only_a_masked_exception_is_unmasked() -> None:
    cause = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    masked = SystemError("<class 'logging.LogRecord'> returned a result with an exception set")
    masked.__cause__ = cause
    assert unmasked(masked) is cause
    other = SystemError("something else")
    other.__cause__ = cause
    assert unmasked(other) is other
    assert unmasked(SystemError(masked.args[0])).args == masked.args
