"""The pre-grant's fence is an asynchronous offset commit (connector/feed.py ``fence``,
connector/fencing.py): asked on the loop's thread, answered by the consumer's ``on_commit``
from inside a later poll, while the loop goes on serving every other key; never asked, and
never followed by a call, once SIGTERM came.

The Kafka clients are fakes behind confluent-kafka's interface (tests/connectors/
fake_kafka.py; the real broker's side: test_pregrant_kafka.py). Calls are read from the
target's own log (``MemoryTarget.calls``), claims and outcomes from what was produced."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from ledger_stream.config import Settings
from ledger_stream.connector.feed import DispatchFeed
from ledger_stream.connector.memory import MemoryTarget
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.connector.runtime import ConnectorWorker
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json
from ledger_stream.serde import AvroCodec
from tests.connectors.fake_kafka import FakeConsumer, FakeProducer

pytestmark = pytest.mark.timeout(30)

CODEC = AvroCodec()
TOPIC = "fa.dispatch"
ARGS = {"amount": 10}
OPTS = ConnectorOptions(instance_id="c", lease_ms=10_000, call_timeout_s=2.0,
                        record_margin_s=1.0, clock_skew_ms=500, max_in_flight=4)


def dispatch(key: str, lease_ms: int = 30_000) -> bytes:
    lease_until = int(time.time() * 1000) + lease_ms
    return CODEC.encode(ev.Dispatch(f"d-{key}", key, 1, "i1", "acme", "pay", "t",
                                    canonical_json(ARGS), args_hash(ARGS), "", 0, 0,
                                    lease_until))


def wait_until(predicate: Callable[[], Any], what: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


# --- the feed -------------------------------------------------------------------------------


class Feed:
    def __init__(self) -> None:
        self.answers: list[tuple[int, int, bool]] = []
        self.consumer: FakeConsumer | None = None

        def make(config: dict[str, Any]) -> Any:
            self.consumer = FakeConsumer(config, TOPIC)
            return self.consumer

        self.feed = DispatchFeed("fake:9092", TOPIC, "g", CODEC, 6000, lambda _: None,
                                 lambda _: None, make,
                                 lambda p, o, ok: self.answers.append((p, o, ok)))
        self.feed.poll(0)  # assigned: partitions 0 and 1
        assert self.consumer is not None
        self.fake: FakeConsumer = self.consumer


def test_a_fence_is_asked_asynchronously_and_answered_from_inside_a_later_poll():
    f = Feed()
    f.fake.hold.add(0)
    assert f.feed.fence(0, 5)
    assert f.fake.asked(0) == [(5, True)]  # asynchronous, returned at once
    f.feed.poll(0)
    assert f.answers == []  # outstanding: the answer is not here yet
    f.fake.release()
    f.feed.poll(0)
    assert f.answers == [(0, 5, True)]


def test_a_refused_fence_is_answered_failed():
    f = Feed()
    f.fake.refuse.add(1)
    assert f.feed.fence(1, 3)
    f.feed.poll(0)
    assert f.answers == [(1, 3, False)]


def test_a_fence_is_not_asked_for_a_partition_not_assigned():
    f = Feed()
    assert not f.feed.fence(7, 1)
    f.feed._on_revoke(f.fake, [TopicPartition(TOPIC, 0)])  # type: ignore[arg-type]
    assert not f.feed.fence(0, 1)
    assert f.fake.commits == []


@pytest.mark.parametrize("holds", [True, False])
def test_a_lower_commit_waits_for_the_fence_then_is_covered_or_sent(holds: bool):
    """Sent after the fence, a commit of an earlier offset would move the partition's
    offset back past the fenced record (its next owner would read it again)."""
    f = Feed()
    f.fake.hold.add(0)
    if not holds:
        f.fake.refuse.add(0)
    assert f.feed.fence(0, 5)
    f.feed.commit({0: 4, 1: 9})
    assert f.fake.asked(0) == [(5, True)] and f.fake.asked(1) == [(9, True)]
    f.fake.release()
    f.feed.poll(0)
    assert f.answers == [(0, 5, holds)]
    assert f.fake.asked(0) == ([(5, True)] if holds else [(5, True), (4, True)])


def test_a_commit_held_by_a_fence_is_dropped_when_the_partition_goes():
    f = Feed()
    f.fake.hold.add(0)
    f.fake.refuse.add(0)
    assert f.feed.fence(0, 5)
    f.feed.commit({0: 4})
    f.feed._on_revoke(f.fake, [TopicPartition(TOPIC, 0)])  # type: ignore[arg-type]
    f.fake.release()
    f.feed.poll(0)
    assert f.answers == [(0, 5, False)]
    assert f.fake.asked(0) == [(5, True)]  # no commit for a partition no longer ours


# --- the worker's loop ----------------------------------------------------------------------


class Loop:
    """A ConnectorWorker on the fakes, its loop on a thread of its own."""

    def __init__(self) -> None:
        self.target = MemoryTarget("t", deduplicates=False)
        self.producer = FakeProducer()
        self.consumer: FakeConsumer | None = None

        def make(config: dict[str, Any]) -> Any:
            self.consumer = FakeConsumer(config, TOPIC)
            return self.consumer

        self.worker = ConnectorWorker(Settings(kafka_bootstrap="fake:9092", topic_prefix="fa"),
                                      "fake:9092", self.target, OPTS, CODEC,
                                      producer=self.producer, consumer=make)  # type: ignore[arg-type]
        assert self.consumer is not None
        self.fake: FakeConsumer = self.consumer
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.worker.serve, args=(self.stop,), daemon=True)

    def called(self, key: str) -> int:
        return sum(1 for r in self.target.calls if r.key == key)

    def produced(self, key: str) -> list[object]:
        return [e for e in map(CODEC.decode, list(self.producer.sent)) if e.key == key]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(15)
        assert not self.thread.is_alive()


@pytest.fixture
def loop() -> Iterator[Loop]:
    lp = Loop()
    lp.thread.start()
    try:
        yield lp
    finally:
        lp.close()


def test_the_loop_serves_other_keys_while_a_fence_is_outstanding(loop: Loop):
    loop.fake.hold.add(0)  # the coordinator has not answered partition 0's fence yet
    loop.fake.append(0, dispatch("acme/pay/a"))
    wait_until(lambda: loop.fake.asked(0), "a's fence")
    polls = loop.fake.polls
    loop.fake.append(1, dispatch("acme/pay/b"))  # read after a's fence was asked
    wait_until(lambda: loop.called("acme/pay/b") == 1, "b's call")
    wait_until(lambda: [e for e in loop.produced("acme/pay/b")
                        if isinstance(e, ev.AttemptOutcome)], "b's outcome")
    assert loop.called("acme/pay/a") == 0 and loop.produced("acme/pay/a") == []
    assert loop.fake.polls > polls  # the loop went on polling
    loop.fake.release()
    wait_until(lambda: loop.called("acme/pay/a") == 1, "a's call")
    claims = [e for e in loop.produced("acme/pay/a") if isinstance(e, ev.AttemptClaim)]
    assert [c.fenced for c in claims] == [True]
    assert loop.target.calls[-1].attempt_id == claims[0].claim_id
    assert loop.fake.asked(0) == [(1, True)]


def test_no_fence_is_asked_once_sigterm_came(loop: Loop):
    """SIGTERM arrives while the poll hands the record over: the fence it would ask could
    only end in a fenced claim withdrawn ``not_called`` (a wasted attempt)."""
    loop.fake.in_poll.append(loop.stop.set)
    loop.fake.append(0, dispatch("acme/pay/a"))
    loop.thread.join(10)
    assert not loop.thread.is_alive() and loop.fake.in_poll == []  # handed over
    assert loop.fake.asked(0) == []  # no fence, no commit: its next owner reads it
    assert loop.called("acme/pay/a") == 0 and loop.produced("acme/pay/a") == []


def test_a_fence_answered_after_sigterm_is_claimed_and_reported_not_called(loop: Loop):
    loop.fake.hold.add(0)
    loop.fake.append(0, dispatch("acme/pay/a"))
    wait_until(lambda: loop.fake.asked(0), "a's fence")
    loop.stop.set()
    time.sleep(0.05)  # the loop drains: the fence's job waits for its answer
    loop.fake.release()
    loop.thread.join(10)
    assert loop.called("acme/pay/a") == 0
    events = loop.produced("acme/pay/a")
    assert [type(e).__name__ for e in events] == ["AttemptClaim", "AttemptOutcome"]
    assert events[0].fenced and events[1].status is ev.OutcomeStatus.NOT_CALLED


def test_a_fenced_claim_recorded_after_sigterm_is_not_called(loop: Loop):
    """SIGTERM arrives just before the poll that brings the fenced claim's acknowledgement:
    the call it would start is not started."""
    loop.producer.in_poll.append(loop.stop.set)
    loop.fake.append(0, dispatch("acme/pay/a"))
    loop.thread.join(10)
    assert loop.producer.in_poll == []  # SIGTERM came before the claim's report
    assert loop.called("acme/pay/a") == 0
    events = loop.produced("acme/pay/a")
    assert [type(e).__name__ for e in events] == ["AttemptClaim", "AttemptOutcome"]
    assert events[0].fenced and events[1].status is ev.OutcomeStatus.NOT_CALLED
