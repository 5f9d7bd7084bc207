"""A cached answer's intent against the client's ``close`` and the hit count: every intent
answered from the cache is delivered or logged as not recorded, a cached answer after
``close`` is refused, and only an answer the cache gave counts as a hit."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ledger_stream import LedgerClient
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.sdk.errors import LedgerUnavailable
from tests.sdk.settled import intent as _intent
from tests.sdk.settled import settle as _settle

NOWHERE = "127.0.0.1:1"  # Kafka unreachable: a produced intent waits in the queue


class _HeldSend(EventProducer):
    """The client's real producer, each send held until ``go`` is set (60 s at most, so a
    broken test ends): the moment a cached answer is between its checks and its produce."""

    def __init__(self, settings: Settings, client: LedgerClient, **extra: Any) -> None:
        super().__init__(settings, NOWHERE, client.codec, acks="all",
                         **{"linger.ms": 0, **extra})
        self.sending, self.go = threading.Event(), threading.Event()

    def send_raw(self, *args: Any, **kwargs: Any) -> None:
        self.sending.set()
        self.go.wait(60.0)
        super().send_raw(*args, **kwargs)


def _client_with_a_settled_key(**producer: Any) -> tuple[LedgerClient, _HeldSend]:
    settings = Settings(kafka_bootstrap=NOWHERE, kafka_timeout_s=1)
    client = LedgerClient(settings)
    # Fails an intent not acknowledged in half a second: close()'s flush then ends soon.
    held = _HeldSend(settings, client, **{"message.timeout.ms": 500, **producer})
    client._producer = held
    first = _intent(1)
    assert client.receipt_cache is not None
    client.receipt_cache.learn(first, _settle(first, int(time.time() * 1000))[1])
    return client, held


def test_close_during_a_cached_answer_delivers_or_logs_its_intent(
        caplog: pytest.LogCaptureFixture) -> None:
    """close() on one thread while another's cached answer is being produced: the answer's
    intent reaches the producer's queue before close flushes it (here Kafka never answers,
    so it is logged as not recorded); no AttributeError from a producer already released."""
    client, held = _client_with_a_settled_key()
    duplicate = _intent(2)
    answers: list[object] = []

    def submit() -> None:
        try:
            answers.append(client.submit(duplicate))
        except Exception as exc:  # noqa: BLE001 - asserted below
            answers.append(exc)

    submitting = threading.Thread(target=submit)
    caplog.set_level(logging.ERROR, "ledger_stream.sdk.cached_answers")
    submitting.start()
    assert held.sending.wait(10)
    closing = threading.Thread(target=client.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # close() waits for the answer being produced (it once ran through)
    held.go.set()
    submitting.join(10)
    closing.join(10)
    assert not submitting.is_alive() and not closing.is_alive()
    (answer,) = answers
    assert isinstance(answer, ev.Receipt), answer
    assert answer.answer is ev.Answer.ALREADY_DONE
    logged = [r for r in caplog.records
              if r.getMessage() == "intent answered from the receipt cache not recorded"]
    assert [r.fields["event_id"] for r in logged] == [duplicate.event_id]  # type: ignore[attr-defined]
    assert client.receipt_cache is not None and len(client.receipt_cache.unrecorded) == 1
    with pytest.raises(RuntimeError, match="closed"):  # after close: refused, not answered
        client.submit(_intent(3))


def test_an_answer_left_to_the_ledger_is_not_a_hit() -> None:
    """The producer's queue full (Kafka gone): the cache could answer, but its intent cannot
    be queued, so the ledger answers; only the answer the cache gave is counted."""
    client, held = _client_with_a_settled_key(**{"queue.buffering.max.messages": 1})
    held.go.set()
    cache = client.receipt_cache
    assert cache is not None
    try:
        assert client._cached(_intent(2)) is not None  # queued: the cache's answer
        assert client._cached(_intent(3)) is None  # no room: left to the ledger
        assert cache.hits == 1
    finally:
        client.close()  # the queued intent times out: logged as not recorded


def test_a_cached_answer_whose_intent_kafka_refuses_at_once_is_not_logged_as_answered(
        caplog: pytest.LogCaptureFixture) -> None:
    """The produce itself raises (here: a topic the client does not know): the caller gets
    LedgerUnavailable, not an answer, so nothing may later say an answered intent was
    lost; the intent is not waited for at close either."""
    client, held = _client_with_a_settled_key()
    held.go.set()

    def refused(*args: Any, **kwargs: Any) -> None:
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))

    held.send_raw = refused  # type: ignore[method-assign]
    caplog.set_level(logging.ERROR, "ledger_stream.sdk.cached_answers")
    answers = client._cached_answers
    assert answers is not None and client.receipt_cache is not None
    try:
        with pytest.raises(LedgerUnavailable):
            client.submit(_intent(2))
        assert answers.unacked == {}
        assert client.receipt_cache.hits == 0
    finally:
        client.close()
    assert not [r for r in caplog.records
                if r.getMessage() == "intent answered from the receipt cache not recorded"]


class _FirstSendHeld(_HeldSend):
    """Only the first send is held (until ``go``; 60 s at most, so a broken test ends): one
    answer stuck between its checks and its produce while another is given."""

    def send_raw(self, *args: Any, **kwargs: Any) -> None:
        if not self.sending.is_set():
            self.sending.set()
            self.go.wait(60.0)
        EventProducer.send_raw(self, *args, **kwargs)


def test_cached_answers_do_not_wait_for_each_other() -> None:
    """Two agents' duplicates answered from the cache at once: the second is answered while
    the first is still being produced (one lock held across each whole answer made 64
    agents queue behind each other: 6.7 ms p50 for an answer that takes 0.1)."""
    settings = Settings(kafka_bootstrap=NOWHERE, kafka_timeout_s=1)
    client = LedgerClient(settings)
    held = _FirstSendHeld(settings, client, **{"message.timeout.ms": 500})
    client._producer = held
    first = _intent(1)
    assert client.receipt_cache is not None
    client.receipt_cache.learn(first, _settle(first, int(time.time() * 1000))[1])
    stuck = threading.Thread(target=client.submit, args=(_intent(2),))
    answers: list[ev.Receipt] = []
    second = threading.Thread(target=lambda: answers.append(client.submit(_intent(3))))
    try:
        stuck.start()
        assert held.sending.wait(10)
        # The first stays held until ``go``: the second must be answered meanwhile. A
        # condition, not a time bound: how long an answer takes on a loaded machine is not
        # what this asserts.
        second.start()
        second.join(30)
        assert not second.is_alive(), "the second answer waited for the first"
        assert stuck.is_alive()  # the first is still being produced
        (answer,) = answers
        assert answer.answer is ev.Answer.ALREADY_DONE
    finally:
        held.go.set()
        stuck.join(10)
        client.close()


def test_a_cached_answer_that_reaches_the_gate_after_close_began_is_refused() -> None:
    """A submit past the client's own closed check when ``close`` runs: its cached answer
    reaches the gate after the close began, and is refused there, never produced through a
    producer being closed (an intent answered but neither recorded nor logged)."""
    client, held = _client_with_a_settled_key()
    held.go.set()
    answers = client._cached_answers
    assert answers is not None
    answers.close()  # what close() does before it closes the producer
    try:
        with pytest.raises(RuntimeError, match="closed"):
            client._cached(_intent(2))
        assert not held.sending.is_set() and answers.unacked == {}
    finally:
        client.close()
