"""SIGTERM while the exactly-once producer sets up (``init_transactions``, which waits for
a transaction coordinator up to 30 s a try, three tries): the processor ends at once with
status 0 and one line, as it does during the other start-up waits."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_stream.config import Settings
from ledger_stream.kafka.layout import Layout
from ledger_stream.processor import runtime
from tests.processor.start_up_stop import assert_a_stop_ends_the_start_up

NOWHERE = "127.0.0.1:1"  # no coordinator ever answers: init_transactions waits


def test_sigterm_during_init_transactions_ends_the_start_up(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    # The topic and layout checks passed (a cluster whose coordinator then went away).
    monkeypatch.setattr(runtime, "wait_for_kafka", lambda *_a, **_kw: True)
    monkeypatch.setattr(runtime, "check_topics", lambda *_a, **_kw: Layout(2))
    settings = Settings(kafka_bootstrap=NOWHERE, state_dir=tmp_path / "state",
                        processing_guarantee="exactly-once")
    # Before: stuck in init_transactions for ~90 s.
    assert_a_stop_ends_the_start_up(settings, caplog, "init_transactions", within_s=2)
