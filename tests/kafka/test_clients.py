"""The ledger's Kafka clients raise what really went wrong, never a SystemError.

confluent-kafka hands a fatal error, or an exception raised by one of our callbacks, to
Python while it serves callbacks; a log line queued behind it then reaches our logger with
the exception still set, and Python raises SystemError instead (kafka/clients.py). These
tests make librdkafka log a great deal (``debug``), so log lines do queue behind the error,
on a real broker."""

from __future__ import annotations

import ast
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import WRAPPED, Consumer, Producer, _unmasking
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
    raise ProcessorError to stop it). The plain client (2.16) passes this too: it keeps the
    callback's exception aside and raises it once the poll ends."""
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


def test_a_masked_fatal_error_comes_out_as_itself() -> None:
    cause = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    def masked_flush() -> int:
        try:
            raise cause
        except KafkaException as exc:
            raise SystemError("<class 'logging.LogRecord'> returned a result with an "
                              "exception set") from exc

    with pytest.raises(KafkaException) as raised:
        _unmasking(masked_flush)()
    assert raised.value is cause
    assert any("returned a result with an exception set" in n for n in cause.__notes__)


@pytest.mark.parametrize("cause", [None, ValueError("not Kafka's")])
def test_any_other_system_error_of_a_client_is_a_fatal_kafka_error(
        cause: Exception | None) -> None:
    """Python 3.13 can clear the pending error in our logger: the call then returns NULL with
    no exception set. The client is broken either way: a fatal error, so a new one takes
    over."""
    def broken() -> int:
        raise SystemError("<built-in method flush> returned NULL without setting an "
                          "exception") from cause

    with pytest.raises(KafkaException) as raised:
        _unmasking(broken)()
    error = raised.value.args[0]
    assert error.fatal() and error.code() == KafkaError._FATAL
    assert "returned NULL without setting an exception" in error.str()


@pytest.mark.parametrize("kind", sorted(WRAPPED))
def test_every_call_that_serves_callbacks_is_wrapped(kind: str) -> None:
    ours, plain = {"Producer": (Producer, confluent_kafka.Producer),
                   "Consumer": (Consumer, confluent_kafka.Consumer)}[kind]
    for name in WRAPPED[kind]:
        method = getattr(ours, name)
        assert method is not getattr(plain, name), name
        assert method.__wrapped__ is getattr(plain, name), name


ROOT = Path(__file__).resolve().parents[2]
# Plain clients on purpose: the bench arms that measure the bare client against the ledger.
PLAIN_ALLOWED = {"ledger_stream/kafka/clients.py", "ledger_lab/bench/arms/latency.py",
                 "ledger_lab/bench/arms/raw_echo.py", "ledger_lab/bench/arms/sdk.py"}


def plain_client_constructions(source: str) -> list[int]:
    """Lines of ``source`` that build a confluent_kafka Producer or Consumer."""
    tree = ast.parse(source)
    names = {alias.asname or alias.name for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.module == "confluent_kafka"
             for alias in node.names if alias.name in ("Producer", "Consumer")}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Name) and f.id in names) or (
                isinstance(f, ast.Attribute) and f.attr in ("Producer", "Consumer")
                and isinstance(f.value, ast.Name) and f.value.id == "confluent_kafka"):
            lines.append(node.lineno)
    return lines


def test_the_check_finds_plain_clients() -> None:
    assert plain_client_constructions(
        "from confluent_kafka import Consumer as C\nimport confluent_kafka\n"
        "c = C({})\np = confluent_kafka.Producer({})\n") == [3, 4]


def test_no_module_builds_a_plain_client() -> None:
    found = {}
    for path in sorted([*ROOT.glob("ledger_stream/**/*.py"), *ROOT.glob("connectors/**/*.py")]):
        relative = path.relative_to(ROOT).as_posix()
        if relative not in PLAIN_ALLOWED:
            lines = plain_client_constructions(path.read_text())
            if lines:
                found[relative] = lines
    assert found == {}, "build ledger_stream.kafka.clients.Producer/Consumer instead"
