"""Reading without a batch wait: ``fetched`` waits only for the first record, then takes what
the client already holds (``consume(n, t)`` would wait for n records or all of t)."""

from __future__ import annotations

from typing import Any

from ledger_stream.kafka.message import fetched


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

    from ledger_stream.config import Settings
    from ledger_stream.kafka import producer as module
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

    class Event:
        def __init__(self, key: str) -> None:
            self.key = key

    class Codec:
        def encode(self, event) -> bytes:
            return b"x"

    monkeypatch.setattr(module, "Producer", FakeProducer)
    sender = module.EventProducer(Settings(topic_prefix="t"), "unused:9092", Codec())
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
