"""SIGTERM to a CLI command: it ends through its finally blocks, and a second SIGTERM while
they run does not cut them short (they stop the processes the command started)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from ledger_stream.cli import main as cli_main


def test_a_second_sigterm_during_the_cleanup_does_not_interrupt_it() -> None:
    previous = cli_main._stop_cleanly_on_sigterm()
    cleaned = []
    try:
        with pytest.raises(SystemExit) as ended:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # interrupted by the first
            finally:
                os.kill(os.getpid(), signal.SIGTERM)  # the sender again, mid-cleanup
                time.sleep(0.2)
                cleaned.append("every stop ran")
        assert ended.value.code == 128 + signal.SIGTERM
        assert cleaned == ["every stop ran"]
    finally:
        signal.signal(signal.SIGTERM, previous)
