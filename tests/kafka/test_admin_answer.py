"""Waiting for an admin request's answer asks for metadata between slices: librdkafka holds
a request for the controller until the broker its last metadata answer named is up, and a
metadata answer naming another one is what sends the request on (tests/kafka/
test_dead_controller.py shows it on a real cluster with that broker killed)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from ledger_stream.kafka import replicas
from ledger_stream.kafka.reach import REDRAW_S, SLICE_S, StopRequested, admin_answer

pytestmark = pytest.mark.timeout(30)


class Admin:
    """The client: counts the metadata requests."""

    def __init__(self) -> None:
        self.asked = 0

    def list_topics(self, timeout: float) -> None:
        self.asked += 1


class HeldForTheController:
    """A request waiting for a dead controller: answered once metadata was asked again."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def result(self, timeout: float) -> str:
        if self.admin.asked:
            return "configs"
        time.sleep(timeout)
        raise TimeoutError


class Silent:
    """A request nobody answers."""

    def result(self, timeout: float) -> str:
        time.sleep(timeout)
        raise TimeoutError


def test_a_request_held_for_a_dead_controller_is_answered_after_a_slice() -> None:
    admin = Admin()
    started = time.monotonic()
    assert admin_answer(admin, HeldForTheController(admin), 10.0, None,  # type: ignore[arg-type]
                        "describing topic t") == "configs"
    assert time.monotonic() - started < 3.0
    assert admin.asked == 1


def test_no_answer_is_still_a_timeout_within_the_bound() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        admin_answer(Admin(), Silent(), 2.0, None, "describing topic t")  # type: ignore[arg-type]
    assert time.monotonic() - started < 3.5


class UnansweredMetadata(Admin):
    """A client whose metadata requests go unanswered too (every broker busy or restarting):
    each waits out its timeout and fails, as librdkafka's list_topics does."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float] = []

    def list_topics(self, timeout: float) -> None:
        self.asked += 1
        self.timeouts.append(timeout)
        time.sleep(timeout)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))


def test_unanswered_metadata_overruns_the_bound_by_at_most_one_redraw() -> None:
    admin = UnansweredMetadata()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        admin_answer(admin, Silent(), 3.0, None, "describing topic t")  # type: ignore[arg-type]
    took = time.monotonic() - started
    assert took < 3.0 + REDRAW_S + 0.4, took
    assert admin.asked >= 2 and set(admin.timeouts) == {REDRAW_S}


def test_a_stop_is_seen_within_a_slice_and_a_redraw() -> None:
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(StopRequested, match="describing topic t: told to stop"):
        admin_answer(UnansweredMetadata(), Silent(), 10.0, stop,  # type: ignore[arg-type]
                     "describing topic t")
    took = time.monotonic() - started
    assert took < SLICE_S + REDRAW_S + 0.4, took


def test_the_min_isr_diagnosis_with_no_config_answer_is_empty_not_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """below_min_isr only adds a reason to an abandoned batch's log line (the processor's
    ``_abandon``): a config request nobody answers must leave it empty, not raise out of
    the processor's loop."""

    class Cluster(Admin):
        def __init__(self, _config: object) -> None:
            super().__init__()

        def list_topics(self, timeout: float) -> SimpleNamespace:
            return SimpleNamespace(topics={"receipts": SimpleNamespace(partitions={})})

        def describe_configs(self, resources: list[object], request_timeout: float
                             ) -> dict[object, Silent]:
            return {resource: Silent() for resource in resources}

    monkeypatch.setattr(replicas, "AdminClient", Cluster)
    started = time.monotonic()
    assert replicas.below_min_isr("unused:9092", ["receipts"], timeout_s=0.5) == []
    assert time.monotonic() - started < 2.0
