"""The processor's stop after a signal: the delivery gets its deadline once, and the kernel's
alarm (the hard bound) is armed once, on the first signal: a second one does not move it.
Waits begun before the stop end at its deadline, not at their own bounds."""

from __future__ import annotations

import threading
import time

import pytest

from ledger_stream.processor import runtime
from ledger_stream.processor.at_least_once import AtLeastOnceDelivery
from ledger_stream.processor.exceptions import BatchAbandoned
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


def _delivery() -> AtLeastOnceDelivery:
    d = AtLeastOnceDelivery.__new__(AtLeastOnceDelivery)  # no producer needed
    d._caller, d._stuck, d._deadline, d._errors = None, [], None, []
    d._changelog_next = {}
    return d


class _SlowProducer:
    """Never acknowledges: each flush waits out its timeout."""

    def flush(self, timeout: float) -> int:
        time.sleep(timeout)
        return 1


def test_a_stop_shortens_waits_already_begun() -> None:
    """A transactional call hung on a coordinator that went away, and a flush, each begun
    before the stop with a 30 s bound, end soon after the stop's deadline."""
    d = _delivery()
    d._producer = object()  # type: ignore[assignment]
    release = threading.Event()
    threading.Timer(0.5, lambda: d.stop_by(time.monotonic() + 0.5)).start()
    started = time.monotonic()
    with pytest.raises(BatchAbandoned, match="send_offsets_to_transaction"):
        d._bounded("send_offsets_to_transaction", release.wait, 30.0)
    assert time.monotonic() - started < 3
    release.set()

    d = _delivery()
    d._producer = _SlowProducer()  # type: ignore[assignment]
    threading.Timer(0.5, lambda: d.stop_by(time.monotonic() + 0.5)).start()
    started = time.monotonic()
    with pytest.raises(BatchAbandoned, match="not acknowledged"):
        d.confirm()
    assert time.monotonic() - started < 3
