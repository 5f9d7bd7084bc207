"""LEDGER_FAILPOINT: the point's name, optionally with the count of the reach that fires."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ledger_stream import failpoints

_REACH_FIVE_TIMES = """
from ledger_stream.failpoints import failpoint
for i in range(1, 6):
    failpoint("other")
    failpoint("here")
    print(i, flush=True)
"""


def _reach(spec: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _REACH_FIVE_TIMES], capture_output=True,
                          text=True, timeout=60, env={**os.environ, failpoints.ENV: spec})


@pytest.mark.parametrize(("spec", "expected"), [
    ("", ("", 0)), ("here", ("here", 1)), ("here@1", ("here", 1)), ("here@30", ("here", 30))])
def test_parse(spec: str, expected: tuple[str, int]) -> None:
    assert failpoints.parse(spec) == expected


@pytest.mark.parametrize("spec", ["here@", "here@0", "here@-1", "here@x", "here@1.5"])
def test_a_bad_count_is_refused_with_the_variable_named(spec: str) -> None:
    with pytest.raises(ValueError, match="LEDGER_FAILPOINT"):
        failpoints.parse(spec)


def test_a_bare_name_fires_at_the_first_reach() -> None:
    done = _reach("here")
    assert done.returncode == -signal.SIGKILL and done.stdout == ""


def test_a_count_fires_at_that_reach_and_not_before() -> None:
    done = _reach("here@3")
    assert done.returncode == -signal.SIGKILL and done.stdout.split() == ["1", "2"]


def test_a_count_beyond_the_reaches_never_fires() -> None:
    done = _reach("here@6")
    assert done.returncode == 0 and done.stdout.split() == ["1", "2", "3", "4", "5"]
