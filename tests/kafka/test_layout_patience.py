"""Reading the recorded partition layout waits out a Kafka that does not answer for a
moment (a partition's leader moving after a broker died) instead of refusing to start."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from ledger_stream.kafka import layout as layout_module
from ledger_stream.kafka.layout import Layout, LayoutRefused, check_layout


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
