"""Which decision core a process runs (ledger_stream/core.py): the build when it is current,
the sources when ``LEDGER_CORE=pure`` or when the build is older than an edit to them, and
a loud error when ``LEDGER_CORE=compiled`` cannot be honoured. Each case runs a fresh
interpreter on a copy of the package (the import decides once per process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compiled.support import copy_package, needs_build, run_python

# Which core runs, and where every loaded domain module came from (``import ledger_stream``
# alone loads none: the package imports its public names on first use).
PROBE = """
import sys, ledger_stream, ledger_stream.domain
from ledger_stream.core import running
files = {m.__file__.rsplit('.', 2)[-1] if m.__file__.endswith('.py') else 'so'
         for n, m in sys.modules.items()
         if n.startswith('ledger_stream.domain.') and getattr(m, '__file__', None)
         and not n.endswith(('__mypyc', '_sources'))}
print(ledger_stream.CORE, running(), ledger_stream.__file__, sorted(files))
"""


def _probe(tmp_path: Path, core: str | None) -> tuple[int, list[str], str]:
    done = run_python(PROBE, cwd=tmp_path, core=core)
    return done.returncode, done.stdout.split(), done.stderr


@needs_build
def test_a_current_build_runs_compiled_unless_pure_is_asked(tmp_path: Path) -> None:
    copy_package(tmp_path)
    for core in (None, "auto", "compiled"):
        code, out, err = _probe(tmp_path, core)
        assert code == 0, err
        assert out[:2] == ["compiled", "compiled"], (core, out)
        assert out[2].startswith(str(tmp_path)), out  # the copy ran, not the checkout
        assert out[3:] == ["['so']"], out  # every domain module from the build
    code, out, err = _probe(tmp_path, "pure")
    assert code == 0, err
    assert out[:2] == ["pure", "pure"] and out[3:] == ["['py']"], out


@needs_build
def test_a_build_older_than_its_sources_never_runs(tmp_path: Path) -> None:
    domain = copy_package(tmp_path)
    decide = domain / "decide.py"
    decide.write_text(decide.read_text() + "\n# edited after the build\n")
    code, out, err = _probe(tmp_path, None)
    assert code == 0, err
    assert out[:2] == ["pure", "pure"] and out[3:] == ["['py']"], out
    assert "older than ledger_stream/domain's sources" in err
    code, out, err = _probe(tmp_path, "compiled")
    assert code != 0
    assert "CoreError: LEDGER_CORE=compiled: the compiled decision core is older" in err


def test_without_a_build_the_sources_run_and_compiled_is_refused(tmp_path: Path) -> None:
    domain = copy_package(tmp_path)
    for built in domain.glob("*.so"):
        built.unlink()
    code, out, err = _probe(tmp_path, None)
    assert code == 0, err
    assert out[:2] == ["pure", "pure"] and out[3:] == ["['py']"], out
    assert not err
    code, out, err = _probe(tmp_path, "compiled")
    assert code != 0 and "is not compiled" in err


@pytest.mark.parametrize("core", ["fast", "mypyc"])
def test_an_unknown_core_is_an_error(tmp_path: Path, core: str) -> None:
    copy_package(tmp_path)
    code, _, err = _probe(tmp_path, core)
    assert code != 0 and f"LEDGER_CORE={core!r}: expected one of auto, pure, compiled" in err
