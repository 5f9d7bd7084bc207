"""Which decision core runs: the mypyc build of ``ledger_stream.domain`` or its source.

The pure-Python modules of ``ledger_stream/domain`` are the reference implementation.
``make install`` also compiles them with mypyc (setup.py, ``LEDGER_BUILD_CORE=mypyc``) into
extension modules beside the sources; Python's import system prefers those. ``select``
runs before anything imports the domain (first thing in ``ledger_stream/__init__``) and
decides once per process:

- ``LEDGER_CORE=pure`` runs the sources even where a build exists (a finder placed first
  on ``sys.meta_path`` loads ``ledger_stream.domain`` from its ``.py`` files), so two
  processes of one group can run different cores;
- ``LEDGER_CORE=compiled`` requires a current build and raises ``CoreError`` otherwise;
- unset or ``auto``: the build if there is one and it is current, else the sources.

A build is current when the digest of the domain's sources it embeds (in its compiled
``_sources`` module, which has no ``.py``) equals the digest of the sources on disk. A
build older than an edit to a source would run old code in silence; it is refused
instead (``auto`` warns and runs the sources). This module imports only the standard
library: setup.py loads it by path to compute the same digest at build time.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

DOMAIN = Path(__file__).resolve().parent / "domain"
PACKAGE = "ledger_stream.domain"
SOURCES_MODULE = "_sources"  # the build's digest; compiled only, never a .py in the tree
MODES = ("auto", "pure", "compiled")


class CoreError(RuntimeError):
    """``LEDGER_CORE=compiled`` and no current build, or an unknown ``LEDGER_CORE``."""


def sources_digest(domain: Path = DOMAIN) -> str:
    """SHA-256 over the domain's ``.py`` files (names and bytes, in name order)."""
    hasher = hashlib.sha256()
    for path in sorted(domain.glob("*.py")):
        if path.stem == SOURCES_MODULE:
            continue
        hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


def _extension(domain: Path, stem: str) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if (found := domain / f"{stem}{suffix}").exists():
            return found
    return None


def built_digest(domain: Path = DOMAIN) -> str | None:
    """The source digest the build in ``domain`` embeds, or None where there is no build."""
    path = _extension(domain, SOURCES_MODULE)
    if path is None:
        return None
    name = f"{PACKAGE}.{SOURCES_MODULE}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.DIGEST)


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Loads ``ledger_stream.domain`` and its modules from their ``.py`` files."""

    def __init__(self, domain: Path) -> None:
        self.domain = domain

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == PACKAGE:
            return importlib.util.spec_from_file_location(
                fullname, self.domain / "__init__.py",
                submodule_search_locations=[str(self.domain)])
        package, _, stem = fullname.rpartition(".")
        source = self.domain / f"{stem}.py"
        if package != PACKAGE or not source.exists():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def _run_sources(domain: Path) -> str:
    if not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder(domain))
    return "pure"


_chosen: str | None = None  # what ``select`` chose in this process


def chosen() -> str | None:
    """What ``select`` chose in this process (None before it ran): the compiled helpers
    outside the domain (the C murmur2) run only beside the compiled core."""
    return _chosen


def select(mode: str | None = None, domain: Path = DOMAIN) -> str:
    """``"compiled"`` or ``"pure"``: which core this process runs (see the module text).
    Call it before ``ledger_stream.domain`` is imported; later it cannot change a thing."""
    global _chosen
    _chosen = _select(mode, domain)
    return _chosen


def _select(mode: str | None, domain: Path) -> str:
    mode = (mode if mode is not None else os.environ.get("LEDGER_CORE", "auto")) or "auto"
    if mode not in MODES:
        raise CoreError(f"LEDGER_CORE={mode!r}: expected one of {', '.join(MODES)}")
    built = built_digest(domain)
    if built is None:
        if mode == "compiled":
            raise CoreError("LEDGER_CORE=compiled but ledger_stream.domain is not compiled "
                            "(`make install` builds it; it needs mypy and a C compiler)")
        return "pure"
    if mode == "pure":
        return _run_sources(domain)
    if built != sources_digest(domain):
        problem = ("the compiled decision core is older than ledger_stream/domain's sources "
                   "(rebuild it: `make install`)")
        if mode == "compiled":
            raise CoreError(f"LEDGER_CORE=compiled: {problem}")
        warnings.warn(f"{problem}; running the sources", RuntimeWarning, stacklevel=2)
        return _run_sources(domain)
    return "compiled"


def running() -> str:
    """Which core this process runs, as the import system actually resolved it (the domain
    is imported here if nothing has yet: ``import ledger_stream`` leaves it unloaded)."""
    decide = importlib.import_module(f"{PACKAGE}.decide")
    origin = str(getattr(decide, "__file__", "") or "")
    return "pure" if origin.endswith(".py") or not origin else "compiled"
