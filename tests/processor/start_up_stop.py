"""SIGTERM while the processor waits at start-up (a fixtures module: it holds no tests)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from ledger_stream.config import Settings
from ledger_stream.processor import runtime

STOPPED = "processor stopped while waiting for Kafka at start-up"


def assert_a_stop_ends_the_start_up(settings: Settings, caplog: pytest.LogCaptureFixture,
                                    what: str, within_s: float) -> None:
    """Start the processor on a thread, set its stop event a second in (inside the wait
    ``what`` by then), as the processor command's SIGTERM handler does during start-up;
    assert it returned (the command exits 0) within ``within_s`` of the stop, and said
    once that it stopped while waiting."""
    stop = threading.Event()
    outcome: list[object] = []

    def start() -> None:
        try:
            outcome.append(runtime.run_processor(settings, stop))
        except BaseException as exc:  # noqa: BLE001 - asserted below
            outcome.append(exc)

    caplog.set_level(logging.INFO, "ledger_stream.processor.runtime")
    starting = threading.Thread(target=start, daemon=True)
    starting.start()
    time.sleep(1.0)  # inside the wait by now
    told = time.monotonic()
    stop.set()
    starting.join(5)
    assert not starting.is_alive(), f"SIGTERM did not end the wait: {what}"
    assert outcome == [None], outcome
    assert time.monotonic() - told < within_s
    said = [r.getMessage() for r in caplog.records if r.name == "ledger_stream.processor.runtime"]
    assert said.count(STOPPED) == 1, said
