"""The model check's configurations, searched one after another in the background from the
moment the tests are collected, at the lowest CPU priority (nice 19), as the simulation's
seeds are (tests/simulation/background.py).

Each search is CPU-bound for seconds; most other tests wait on brokers, sessions and
timeouts. By the time pytest reaches tests/model/ the searches are done and each
configuration's test only reads its result (or waits for it). ``check.sh`` and its output are
the same as in the foreground: the test judges them, and replays a counterexample, exactly as
before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "protocol_traces"
SEARCH_TIMEOUT_S = 140
DONE_FILE_ENV = "LEDGER_MODEL_DONE_FILE"  # touched when every search has finished
Config = tuple[str, dict[str, str], list[str]]


def configurations() -> list[Config]:
    """``configs.txt``: one configuration per line, ``NAME [VAR=value ...] -DFLAG=value ...``."""
    found = []
    for line in (HERE / "configs.txt").read_text(encoding="utf-8").splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        env = dict(w.split("=", 1) for w in words[1:] if not w.startswith("-"))
        found.append((words[0], env, [w for w in words[1:] if w.startswith("-")]))
    return found


def search(name: str, env: dict[str, str], flags: list[str], build: Path,
           nice: bool = False) -> tuple[int, str]:
    """(exit status of check.sh, its output) for one configuration, built in ``build``."""
    run_env = {**os.environ, **env, "LSMODEL_DIR": str(build), "TRACE_DIR": str(TRACES),
               "SHORTEST": "1"}
    popen = subprocess.Popen(["sh", str(HERE / "check.sh"), name, *flags], env=run_env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=(lambda: os.nice(19)) if nice else None,
                             # its own process group (pan, gcc, sh) in the tests' session, so
                             # nice 19 holds under autogroup scheduling
                             process_group=0)
    _current.append(popen)
    try:
        out, _ = popen.communicate(timeout=SEARCH_TIMEOUT_S)
        return popen.returncode, out
    except subprocess.TimeoutExpired:
        _kill(popen)
        return 2, f"{name}: the search did not finish in {SEARCH_TIMEOUT_S} s"
    finally:
        _current.remove(popen)


def _kill(popen: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGKILL)
    popen.wait(10)


_current: list[subprocess.Popen[str]] = []


class Searches:
    def __init__(self, configs: list[Config]) -> None:
        self._configs = configs
        self._dir = Path(tempfile.mkdtemp(prefix="ledger-model-"))
        self._results: dict[str, tuple[int, str]] = {}
        self._done = {name: threading.Event() for name, _, _ in configs}
        self._stopped = False
        threading.Thread(target=self._run, name="model-searches", daemon=True).start()

    def _run(self) -> None:
        for name, env, flags in self._configs:
            if self._stopped:
                break
            self._results[name] = search(name, env, flags, self._dir, nice=True)
            self._done[name].set()
        # `make test` starts its own-cluster tests once the searches are done, so that
        # their brokers do not starve these nice-19 searches past their time limit.
        signal_file = os.environ.get(DONE_FILE_ENV)
        if signal_file:
            Path(signal_file).touch()

    def result(self, name: str, timeout_s: float) -> tuple[int, str] | None:
        """The configuration's (status, output) once searched; None if not within the wait
        or not one of these configurations."""
        done = self._done.get(name)
        if done is None or not done.wait(timeout_s):
            return None
        return self._results[name]

    def stop(self) -> None:
        self._stopped = True
        for popen in list(_current):
            _kill(popen)


_running: Searches | None = None


def start_if_selected(nodeids: list[str]) -> None:
    global _running
    if any(n.startswith("tests/model/test_model.py::test_model_configuration_holds")
           for n in nodeids):
        _running = Searches(configurations())


def running() -> Searches | None:
    return _running


def stop() -> None:
    if _running is not None:
        _running.stop()
