"""Reading without a batch wait: ``fetched`` waits only for the first record, then takes what
the client already holds (``consume(n, t)`` would wait for n records or all of t)."""

from __future__ import annotations

from typing import Any

from ledger_stream.kafka.message import fetched


class Event:
    """What ``EventProducer.deliver`` reads of an event: its key."""

    def __init__(self, key: str) -> None:
        self.key = key


class Codec:
    def encode(self, event: Event) -> bytes:
        return b"x"


def sender_over(monkeypatch, producer_class: type, **module_values: float) -> Any:
    """An ``EventProducer`` whose librdkafka producer is ``producer_class``."""
    from ledger_stream.config import Settings
    from ledger_stream.kafka import producer as module

    monkeypatch.setattr(module, "Producer", producer_class)
    for name, value in module_values.items():
        monkeypatch.setattr(module, name, value)
    return module.EventProducer(Settings(topic_prefix="t"), "unused:9092", Codec())


class FakeConsumer:
    """The two calls ``fetched`` may make, recorded; records come from a list."""

    def __init__(self, ready: list[str]) -> None:
        self.ready = list(ready)
        self.calls: list[tuple[str, Any, Any]] = []

    def poll(self, timeout: float) -> str | None:
        self.calls.append(("poll", timeout, None))
        return self.ready.pop(0) if self.ready else None

    def consume(self, num_messages: int, timeout: float) -> list[str]:
        self.calls.append(("consume", num_messages, timeout))
        taken, self.ready = self.ready[:num_messages], self.ready[num_messages:]
        return taken


def test_nothing_arrived_is_one_poll_with_the_timeout():
    consumer = FakeConsumer([])
    assert fetched(consumer, 500, 0.5) == []  # type: ignore[arg-type]
    assert consumer.calls == [("poll", 0.5, None)]


def test_the_rest_is_taken_without_waiting_and_never_more_than_asked():
    consumer = FakeConsumer(["a", "b", "c", "d"])
    assert fetched(consumer, 3, 0.5) == ["a", "b", "c"]  # type: ignore[arg-type]
    assert consumer.calls == [("poll", 0.5, None), ("consume", 2, 0)]
    assert fetched(consumer, 1, 0.5) == ["d"]  # type: ignore[arg-type]


def test_each_thread_waits_for_its_own_records_report(monkeypatch) -> None:
    """Two threads send at once; one record is refused. The thread whose record was refused
    raises; the other returns. (With send + flush over one shared failure list, either
    could take the other's failure: a refused intent taken as acknowledged.)"""
    import threading

    import pytest

    from ledger_stream.kafka.exceptions import DeliveryFailed

    class Refused:
        def str(self) -> str:
            return "refused"

    class Msg:
        def topic(self) -> str:
            return "t.intents"

    class FakeProducer:
        def __init__(self, config) -> None:
            self.pending, self.lock = [], threading.Lock()

        def produce(self, topic, value, key, on_delivery, **extra) -> None:
            with self.lock:
                self.pending.append((key, on_delivery))

        def poll(self, timeout: float) -> int:
            with self.lock:
                due, self.pending = self.pending, []
            for key, callback in due:
                callback(Refused() if key == b"acme/refund/bad" else None, Msg())
            return len(due)

    sender = sender_over(monkeypatch, FakeProducer)
    results: dict[str, str] = {}
    both = threading.Barrier(2)

    def send(key: str) -> None:
        both.wait()
        try:
            sender.deliver("intents", Event(key), timeout_s=5)
            results[key] = "acknowledged"
        except DeliveryFailed as exc:
            results[key] = f"failed: {exc}"

    threads = [threading.Thread(target=send, args=(k,))
               for k in ("acme/refund/bad", "acme/refund/good")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {"acme/refund/bad": "failed: t.intents: refused",
                       "acme/refund/good": "acknowledged"}
    with pytest.raises(DeliveryFailed, match="not acknowledged"):
        sender._producer.poll = lambda timeout: 0  # nothing ever reported
        sender.deliver("intents", Event("acme/refund/slow"), timeout_s=0.3)


def test_a_report_served_by_another_waiters_poll_wakes_its_own_waiter(monkeypatch) -> None:
    """librdkafka hands a batch of reports to one poller and wakes no other. Two threads
    deliver at once, their reports come back together: both return at once, not the one
    whose report the other's poll served only when its own poll times out."""
    import threading
    import time

    class FakeProducer:
        """Reports come as one batch 50 ms after two records are in (the broker's answer);
        a poll takes the batch, or sleeps until one comes or its timeout passes (librdkafka
        wakes one poller)."""

        def __init__(self, config) -> None:
            self.cond = threading.Condition()
            self.produced: list = []
            self.batches: list[list] = []
            self.reported_at = 0.0

        def produce(self, topic, value, key, on_delivery, **extra) -> None:
            with self.cond:
                self.produced.append(on_delivery)
                if len(self.produced) == 2:
                    threading.Timer(0.05, self.answer, args=(self.produced,)).start()
                    self.produced = []

        def answer(self, batch: list) -> None:
            with self.cond:
                self.batches.append(batch)
                self.reported_at = time.monotonic()
                self.cond.notify()

        def poll(self, timeout: float) -> int:
            with self.cond:
                if not self.batches and timeout > 0:
                    self.cond.wait(timeout)
                due = [cb for batch in self.batches for cb in batch]
                self.batches = []
            for callback in due:
                callback(None, None)
            return len(due)

    sender = sender_over(monkeypatch, FakeProducer, DELIVER_POLL_S=2.0)
    returned: list[float] = []
    both = threading.Barrier(2)

    def send() -> None:
        both.wait()
        sender.deliver("intents", Event("acme/refund/1"), timeout_s=10)
        returned.append(time.monotonic())

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(returned) == 2
    reported_at = sender._producer.reported_at
    assert max(returned) - reported_at < 1.0, "a waiter slept through its own report"


def test_the_waiter_that_polls_hands_the_polling_on_when_its_report_came(monkeypatch
                                                                        ) -> None:
    """Two threads deliver, the second 10 ms after the first (which polls for both); the
    first record's report comes after 50 ms, the second's after 300 ms: served when it
    comes, not after its waiter's next look (DELIVER_FOLLOW_S)."""
    import threading
    import time

    delays = {b"acme/refund/fast": 0.05, b"acme/refund/slow": 0.3}

    class FakeProducer:
        def __init__(self, config) -> None:
            self.cond = threading.Condition()
            self.ready: list = []
            self.reported_at: dict[bytes, float] = {}

        def produce(self, topic, value, key, on_delivery, **extra) -> None:
            threading.Timer(delays[key], self.answer, args=(key, on_delivery)).start()

        def answer(self, key: bytes, callback) -> None:
            with self.cond:
                self.ready.append(callback)
                self.reported_at[key] = time.monotonic()
                self.cond.notify()

        def poll(self, timeout: float) -> int:
            with self.cond:
                if not self.ready and timeout > 0:
                    self.cond.wait(timeout)
                due, self.ready = self.ready, []
            for callback in due:
                callback(None, None)
            return len(due)

    sender = sender_over(monkeypatch, FakeProducer, DELIVER_FOLLOW_S=3.0)
    returned: dict[bytes, float] = {}

    def send(key: str) -> None:
        sender.deliver("intents", Event(key), timeout_s=10)
        returned[key.encode()] = time.monotonic()

    threads = [threading.Thread(target=send, args=(k.decode(),)) for k in delays]
    for t in threads:
        t.start()
        time.sleep(0.01)
    for t in threads:
        t.join(10)
    reported_at = sender._producer.reported_at
    assert sorted(returned) == sorted(delays)
    for key in delays:
        assert returned[key] - reported_at[key] < 1.0, f"{key!r} waited past its report"
