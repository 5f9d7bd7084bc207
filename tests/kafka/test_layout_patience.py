"""Reading the recorded partition layout waits out a Kafka that does not answer for a
moment (a partition's leader moving after a broker died) instead of refusing to start."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from ledger_stream.kafka import layout as layout_module
from ledger_stream.kafka.layout import Layout, LayoutRefused, check_layout
from ledger_stream.kafka.reach import StopRequested


def _flaky(failures: int, answer: Layout | None):
    calls = {"n": 0}

    def read(bootstrap: str, changelog: str, timeout_s: float,
             stop: object = None) -> Layout | None:
        calls["n"] += 1
        if calls["n"] <= failures:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "leader moving"))
        return answer
    return read, calls


def test_a_read_that_fails_for_a_moment_is_asked_again(monkeypatch: pytest.MonkeyPatch):
    read, calls = _flaky(2, Layout(3))
    monkeypatch.setattr(layout_module, "read_layout", read)
    monkeypatch.setattr(layout_module.time, "sleep", lambda s: None)
    assert check_layout("b", "t.changelog", {"t.intents": 3, "t.changelog": 3},
                        timeout_s=30) == Layout(3)
    assert calls["n"] == 3


def test_a_read_that_never_answers_is_refused_at_the_deadline(
        monkeypatch: pytest.MonkeyPatch):
    read, calls = _flaky(10**9, Layout(3))
    monkeypatch.setattr(layout_module, "read_layout", read)
    with pytest.raises(LayoutRefused, match="reading the partition layout"):
        check_layout("b", "t.changelog", {"t.intents": 3}, timeout_s=0.5)
    assert calls["n"] >= 1


def test_a_record_this_code_did_not_write_is_refused_at_once(monkeypatch: pytest.MonkeyPatch):
    calls = {"n": 0}

    def read(bootstrap: str, changelog: str, timeout_s: float,
             stop: object = None) -> Layout | None:
        calls["n"] += 1
        raise ValueError("not a layout record")
    monkeypatch.setattr(layout_module, "read_layout", read)
    with pytest.raises(LayoutRefused):
        check_layout("b", "t.changelog", {"t.intents": 3}, timeout_s=30)
    assert calls["n"] == 1


def test_sigterm_while_the_layout_is_recorded_ends_the_start_up(
        monkeypatch: pytest.MonkeyPatch):
    """A fresh deployment (no layout recorded) whose cluster does not acknowledge the layout
    record: a SIGTERM then ends the start-up within about a second (StopRequested: the
    process ends with status 0 and one line), not after the whole start-up bound."""
    monkeypatch.setattr(layout_module, "read_layout", lambda *_args, **_kw: None)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    with pytest.raises(StopRequested, match="recording the layout"):
        check_layout("127.0.0.1:1", "t.changelog", {"t.intents": 3, "t.changelog": 3},
                     record=True, timeout_s=8, stop=stop)
    assert time.monotonic() - started < 2.5
