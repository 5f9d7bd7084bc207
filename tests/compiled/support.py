"""What the compiled-core tests share: whether this tree holds a build, and a copy of the
package to run in another process (``python -c`` from the copy's folder finds the copy
before the installed package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger_stream.core import DOMAIN, built_digest

PACKAGE = DOMAIN.parent
BUILT = built_digest() is not None
needs_build = pytest.mark.skipif(
    not BUILT, reason="no compiled core in this tree (`make install` builds it)")


def copy_package(folder: Path) -> Path:
    """The ledger_stream package (sources and any build) copied into ``folder``."""
    shutil.copytree(PACKAGE, folder / "ledger_stream",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return folder / "ledger_stream" / "domain"


def run_python(code: str, cwd: Path | None = None, core: str | None = None,
               timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with ``LEDGER_CORE=core`` (unset when None)."""
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_CORE"}
    if core is not None:
        env["LEDGER_CORE"] = core
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout_s)
