"""The processor's stop after a signal: the delivery gets its deadline once, and the kernel's
alarm (the hard bound) is armed once, on the first signal: a second one does not move it."""

from __future__ import annotations

import threading

import pytest

from ledger_stream.processor import runtime
from ledger_stream.processor.runtime import STOP_BOUND_S, STOP_CALLS_S, Processor


class _Delivery:
    def __init__(self) -> None:
        self.deadlines: list[float] = []

    def stop_by(self, deadline: float) -> None:
        self.deadlines.append(deadline)


class _Checkpoint:
    def __init__(self) -> None:
        self.delivery = _Delivery()


def test_the_first_signal_arms_the_bound_and_a_second_does_not_move_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    alarms: list[int] = []
    monkeypatch.setattr(runtime.signal, "alarm", alarms.append)
    monkeypatch.setattr(runtime.time, "monotonic", lambda: 100.0)
    p = Processor.__new__(Processor)
    p._stop = threading.Event()
    p._stop_at = float("inf")
    p._checkpoint = _Checkpoint()  # type: ignore[assignment]
    p._on_signal(15, None)
    p._on_signal(15, None)
    assert alarms == [STOP_BOUND_S]
    assert p._checkpoint.delivery.deadlines == [100.0 + STOP_CALLS_S]  # type: ignore[attr-defined]
    assert p._stop.is_set() and p._stop_at == 100.0
