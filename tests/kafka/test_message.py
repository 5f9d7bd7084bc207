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
