"""`.ci/prereqs --check`, which `make test` runs first: a missing system program is named
with its exact install command within seconds, instead of failing tests minutes later.

Each case runs the script with a PATH of links to the real programs, one left out, so it
needs neither root nor a machine that lacks anything. ``--check`` never installs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "prereqs"
TOOLS = ("make", "java", "mvn", "chromium", "spin", "gcc", "prometheus", "promtool", "pg_ctl")
BASH = shutil.which("bash") or "/bin/bash"
LN = shutil.which("ln") or "/bin/ln"


def run_check(path_dir: Path) -> tuple[int, str, float]:
    """(exit status, output, seconds) of the script in report-only mode with PATH=path_dir."""
    env = {"PATH": str(path_dir), "PYTHON": "python3", "HOME": os.environ.get("HOME", "/")}
    start = time.monotonic()
    done = subprocess.run([BASH, str(SCRIPT), "--check"], env=env, capture_output=True,
                          text=True, timeout=30)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - start


def path_without(tmp_path: Path, left_out: str) -> Path:
    """A folder of links to this machine's tools (and this Python as python3), but one."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").symlink_to(os.path.realpath(sys.executable))
    for tool in TOOLS:
        found = shutil.which(tool)
        if tool != left_out and found:
            (folder / tool).symlink_to(os.path.realpath(found))
    return folder


def install_lines(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if "apt-get install -y" in line]


@pytest.mark.parametrize(("left_out", "package", "lean"), [
    ("spin", "spin", False),
    ("chromium", "chromium", False),
    ("mvn", "maven", False),
    ("java", "openjdk-17-jre-headless", False),
    ("promtool", "prometheus", True),  # without the recommended node exporter
])
def test_a_missing_tool_is_named_with_its_install_command_in_seconds(
        tmp_path, left_out, package, lean):
    code, output, seconds = run_check(path_without(tmp_path, left_out))
    assert code == 1, output
    assert seconds < 5, f"took {seconds:.1f} s"
    assert f"- {left_out} " in output, output
    lines = [words for words in install_lines(output) if package in words]
    assert len(lines) == 1, output
    assert ("--no-install-recommends" in lines[0]) is lean, output
    assert "apt-get update" in output


def test_a_java_older_than_17_is_refused(tmp_path):
    folder = path_without(tmp_path, "java")
    old_java = folder / "java"
    old_java.write_text('#!/bin/sh\necho \'openjdk version "11.0.21" 2023-10-17\' >&2\n')
    old_java.chmod(0o755)
    code, output, _ = run_check(folder)
    assert code == 1 and "found 11 first on PATH" in output, output
    assert any("openjdk-17-jre-headless" in words for words in install_lines(output)), output


def test_check_mode_reports_without_installing_even_as_root(tmp_path):
    # apt-get on PATH is a recorder: --check must name the command, never run it.
    folder = path_without(tmp_path, "spin")
    ran = tmp_path / "apt-get-ran"
    apt = folder / "apt-get"
    apt.write_text(f"#!/bin/sh\necho \"$@\" >> {ran}\n")
    apt.chmod(0o755)
    code, output, _ = run_check(folder)
    assert code == 1 and not ran.exists(), output


@pytest.mark.skipif(os.geteuid() != 0, reason="the script installs only as root (CI runs as root)")
def test_as_root_it_installs_the_missing_packages_with_one_update(tmp_path):
    # apt-get here records its arguments and "installs" spin by linking the real one, so the
    # script's check after installing passes: the path .ci/run takes on a fresh machine.
    folder = path_without(tmp_path, "spin")
    calls = tmp_path / "apt-get-calls"
    apt = folder / "apt-get"
    real_spin = os.path.realpath(shutil.which("spin") or "/bin/true")
    apt.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n"
                   f"[ \"$1\" = install ] && {LN} -sf {real_spin} {folder}/spin\nexit 0\n")
    apt.chmod(0o755)
    env = {"PATH": str(folder), "PYTHON": "python3", "HOME": os.environ.get("HOME", "/")}
    done = subprocess.run([BASH, str(SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq spin"]
