"""``ledger-stream --version``: the installed command names the version pyproject.toml gives."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_version_flag_prints_the_package_version_without_a_command():
    expected = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    command = Path(sys.executable).parent / "ledger-stream"  # the installed entry point
    done = subprocess.run([str(command), "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ledger-stream {expected}"
