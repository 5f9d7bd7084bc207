"""SIGTERM while the exactly-once producer sets up (``init_transactions``, which waits for
a transaction coordinator up to 30 s a try, three tries): the processor ends at once with
status 0 and one line, as it does during the other start-up waits."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from ledger_stream.config import Settings
from ledger_stream.kafka.layout import Layout
from ledger_stream.processor import runtime

NOWHERE = "127.0.0.1:1"  # no coordinator ever answers: init_transactions waits


def test_sigterm_during_init_transactions_ends_the_start_up(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    # The topic and layout checks passed (a cluster whose coordinator then went away).
    monkeypatch.setattr(runtime, "wait_for_kafka", lambda *_a, **_kw: True)
    monkeypatch.setattr(runtime, "check_topics", lambda *_a, **_kw: Layout(2))
    settings = Settings(kafka_bootstrap=NOWHERE, state_dir=tmp_path / "state",
                        processing_guarantee="exactly-once")
    stop = threading.Event()
    outcome: list[object] = []

    def start() -> None:
        try:
            outcome.append(runtime.run_processor(settings, stop))
        except BaseException as exc:  # noqa: BLE001 - asserted below
            outcome.append(exc)

    caplog.set_level(logging.INFO, "ledger_stream.processor.runtime")
    starting = threading.Thread(target=start, daemon=True)  # before: stuck for ~90 s
    starting.start()
    time.sleep(1.0)  # inside init_transactions by now
    told = time.monotonic()
    stop.set()  # what the processor command's SIGTERM handler does during start-up
    starting.join(5)
    assert not starting.is_alive(), "SIGTERM did not end init_transactions' wait"
    assert outcome == [None], outcome  # returned: the command exits 0
    assert time.monotonic() - told < 2
    said = [r.getMessage() for r in caplog.records if r.name == "ledger_stream.processor.runtime"]
    assert said.count("processor stopped while waiting for Kafka at start-up") == 1, said
