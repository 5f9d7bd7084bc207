"""Waiting for an admin request's answer asks for metadata between slices: librdkafka holds
a request for the controller until the broker its last metadata answer named is up, and a
metadata answer naming another one is what sends the request on (tests/kafka/
test_dead_controller.py shows it on a real cluster with that broker killed)."""

from __future__ import annotations

import time

import pytest

from ledger_stream.kafka.reach import admin_answer

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


def test_a_request_held_for_a_dead_controller_is_answered_after_a_slice() -> None:
    admin = Admin()
    started = time.monotonic()
    assert admin_answer(admin, HeldForTheController(admin), 10.0, None,  # type: ignore[arg-type]
                        "describing topic t") == "configs"
    assert time.monotonic() - started < 3.0
    assert admin.asked == 1


def test_no_answer_is_still_a_timeout_within_the_bound() -> None:
    class Silent:
        def result(self, timeout: float) -> str:
            time.sleep(timeout)
            raise TimeoutError

    started = time.monotonic()
    with pytest.raises(TimeoutError):
        admin_answer(Admin(), Silent(), 2.0, None, "describing topic t")  # type: ignore[arg-type]
    assert time.monotonic() - started < 3.5
