"""No test module imports another test module: shared fakes and helpers live in modules
that hold no tests (``factories``, ``support``, ``fakes``, ``contract``, ...), so running
or moving one test file never runs or breaks another's tests."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _is_test_module(name: str) -> bool:
    last = name.rpartition(".")[2]
    return last.startswith("test_") or last == "conftest"


def imports_of_test_modules() -> set[tuple[str, str]]:
    """(importing file, imported test module) for every import of a test module."""
    found = set()
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("tests.") and _is_test_module(name):
                    found.add((path.relative_to(TESTS.parent).as_posix(), name))
    return found


def test_no_test_module_imports_another() -> None:
    assert imports_of_test_modules() == set(), "move the shared helper to a fixtures module"


def test_the_check_sees_an_import_of_a_test_module() -> None:
    assert _is_test_module("tests.domain.test_decide") and _is_test_module("tests.x.conftest")
    assert not _is_test_module("tests.factories")
