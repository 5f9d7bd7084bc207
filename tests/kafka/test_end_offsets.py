"""Coalesced end-offset requests (kafka/end_offsets.py), against a fake admin client: every
caller's answer comes from a request sent after it called; concurrent callers share requests;
a failed request fails every caller it covered, once, and the next call asks again."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import KafkaException

from ledger_stream.kafka.end_offsets import EndOffsets

pytestmark = pytest.mark.timeout(60)


class FakeAdmin:
    """Each request answers every partition with the number of requests sent so far, after
    ``delay_s``; ``fail`` makes requests raise."""

    def __init__(self, delay_s: float = 0.02) -> None:
        self.requests = 0
        self.delay_s = delay_s
        self.fail: Exception | None = None
        self._lock = threading.Lock()

    def list_offsets(self, wanted: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
        with self._lock:
            self.requests += 1
            sent = self.requests
        time.sleep(self.delay_s)
        if self.fail is not None:
            raise type(self.fail)(*self.fail.args)  # a new object per request, as the client's
        out = {}
        for tp in wanted:
            f: Future[Any] = Future()
            f.set_result(type("Info", (), {"offset": sent})())
            out[tp] = f
        return out


def test_an_answer_comes_from_a_request_sent_after_the_call() -> None:
    admin = FakeAdmin()
    ends = EndOffsets(admin, "t", 3)  # type: ignore[arg-type]

    def call(i: int) -> tuple[int, int]:
        sent_before = admin.requests
        return sent_before, ends.get(i % 3)

    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(call, range(400)))
    assert all(answer > before for before, answer in answers)
    assert admin.requests < 400 / 4  # shared, not one per caller


def test_a_failed_request_fails_the_callers_it_covered_then_the_next_call_asks_again() -> None:
    admin = FakeAdmin(delay_s=0.2)
    admin.fail = KafkaException("broker down")
    ends = EndOffsets(admin, "t", 1, patience_s=0)  # type: ignore[arg-type]
    errors: list[BaseException] = []

    def call() -> None:
        try:
            ends.get(0)
        except KafkaException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(errors) == 8
    assert len({id(e) for e in errors}) == 8  # each thread its own object, tracebacks apart
    assert all(str(e) == "broker down" for e in errors)
    assert admin.requests <= 3  # the waiters took the flight's error, they did not each retry
    admin.fail = None
    assert ends.get(0) == admin.requests


def test_a_partition_the_topic_does_not_have_is_refused() -> None:
    ends = EndOffsets(FakeAdmin(), "t", 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition 2 of t does not exist"):
        ends.get(2)
