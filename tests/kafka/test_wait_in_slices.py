"""The one bounded wait for a single answer at start-up (reach.py's ``wait_in_slices``):
done as soon as the answer is there, False at the bound, and a stop seen within a slice."""

from __future__ import annotations

import threading
import time

import pytest

from ledger_stream.kafka.reach import StopRequested, wait_in_slices


def test_an_answer_ends_the_wait_and_none_is_false_at_the_bound() -> None:
    answered = threading.Event()
    threading.Timer(0.3, answered.set).start()
    began = time.monotonic()
    assert wait_in_slices(answered.wait, 5.0, None, "asking", slice_s=0.1)
    assert time.monotonic() - began < 1.0
    never = threading.Event()
    began = time.monotonic()
    assert not wait_in_slices(never.wait, 0.5, None, "asking", slice_s=0.1)
    assert 0.45 <= time.monotonic() - began < 1.5
    asked: list[float] = []
    assert not wait_in_slices(lambda s: bool(asked.append(s)), 0.0, None, "asking")
    assert asked == [0.0]  # a zero bound still asks once, without waiting


def test_a_stop_ends_the_wait_within_a_slice() -> None:
    stop, never = threading.Event(), threading.Event()
    threading.Timer(0.3, stop.set).start()
    began = time.monotonic()
    with pytest.raises(StopRequested, match="asking: told to stop"):
        wait_in_slices(never.wait, 30.0, stop, "asking", slice_s=0.2)
    assert time.monotonic() - began < 1.0
