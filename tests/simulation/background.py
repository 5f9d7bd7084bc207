"""The simulation's 100,000 seeds in a child process, started as soon as the tests are
collected, at the lowest CPU priority (nice 19).

The seeds are CPU-bound; most other tests wait on brokers, sessions and timeouts. Started
first, the child uses the idle CPU beside them (the processes the tests start run at normal
priority and pre-empt it), and the simulation test at the end only collects its answer.
``LEDGER_SIM_TEST_RUNS`` (``make mutate``) keeps the in-process run: a mutant must be
imported by the tests' own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RUNS = 100_000
TEST_ID = ("tests/simulation/test_simulation.py::"
           "test_a_hundred_thousand_schedules_keep_every_invariant")


class Background:
    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="ledger-sim-"))
        self._out = (self._dir / "summary.json").open("wb")
        self._err = (self._dir / "progress.log").open("wb")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "ledger_stream.cli.main", "simulate", "--seed", "0",
             "--runs", str(RUNS)],
            stdout=self._out, stderr=self._err, preexec_fn=lambda: os.nice(19),
            # Its own process group (the pool's workers are in it), but the tests' session:
            # with the kernel's autogroup scheduling, a new session would be a group of its
            # own that nice 19 does not lower against the tests.
            process_group=0)

    def result(self, timeout_s: float) -> tuple[int, dict[str, Any], str]:
        """(exit status, the JSON summary, the tail of stderr with any failing trace)."""
        code = self.popen.wait(timeout_s)
        self._out.close()
        self._err.close()
        text = (self._dir / "summary.json").read_text()
        tail = (self._dir / "progress.log").read_text(errors="replace")[-6000:]
        try:
            summary = json.loads(text)
        except ValueError:
            summary = {"unparsed": text[-2000:]}
        return code, summary, tail

    def stop(self) -> None:
        """Stop the child and its worker processes (an interrupted run): the process group
        the child leads, by its id. Killing only the child would leave its workers running."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)


_running: Background | None = None


def start_if_selected(nodeids: list[str]) -> None:
    global _running
    if os.environ.get("LEDGER_SIM_TEST_RUNS") is None and TEST_ID in nodeids:
        _running = Background()


def running() -> Background | None:
    return _running


def stop() -> None:
    if _running is not None:
        _running.stop()
