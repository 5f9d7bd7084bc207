"""The build's one optional step: the compiled decision core (ledger_stream/core.py).

``pip install -e .`` (no compiler, no mypy) builds nothing here: the pure-Python core runs.
With ``LEDGER_BUILD_CORE=mypyc`` (``make install``: ``setup.py build_ext --inplace`` in the
venv, which has mypy) the modules of ``ledger_stream/domain`` are compiled with mypyc into
extension modules beside their sources, plus ``_sources``, a small C module with no
``.py`` that holds the digest of the sources it was built from: a build older than an edit
is refused at import rather than run (ledger_stream/core.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
DOMAIN = ROOT / "ledger_stream" / "domain"
BUILD = ROOT / "build"
DIGEST_C = """#define PY_SSIZE_T_CLEAN
#include <Python.h>
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_%(name)s(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "DIGEST", "%(digest)s") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
"""


def _core_module():  # type: ignore[no-untyped-def]
    """ledger_stream/core.py by path: importing the package would import the domain."""
    path = ROOT / "ledger_stream" / "core.py"
    spec = importlib.util.spec_from_file_location("_ledger_core", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiled_core() -> list:  # type: ignore[type-arg]
    """mypyc's extensions for the domain and its digest module (C generated now)."""
    from mypyc.build import mypycify  # only here: a plain install needs no mypy

    core = _core_module()
    # The package's __init__ stays Python: the shared library lives inside the package,
    # and a compiled __init__ would import it before the package exists.
    sources = sorted(str(p.relative_to(ROOT)) for p in DOMAIN.glob("*.py")
                     if p.stem not in (core.SOURCES_MODULE, "__init__"))
    extensions = mypycify(sources, opt_level="3", group_name="ledger_stream.domain.core")
    # The digest as a plain C module: it loads by path, without the package (a mypyc module
    # would import the package first, and with it the compiled modules it is to vouch for).
    BUILD.mkdir(exist_ok=True)
    c_source = BUILD / f"{core.SOURCES_MODULE}.c"
    c_source.write_text(DIGEST_C % {"name": core.SOURCES_MODULE,
                                    "digest": core.sources_digest(DOMAIN)})
    extensions.append(Extension(f"ledger_stream.domain.{core.SOURCES_MODULE}",
                                [str(c_source.relative_to(ROOT))]))
    return extensions


def compiled_partitioner() -> list:  # type: ignore[type-arg]
    """ledger_stream/kafka/murmur2.c as ``ledger_stream.kafka._murmur2``, with the digest of
    the source it was built from (ledger_stream/kafka/partitioner.py refuses an older one)."""
    source = ROOT / "ledger_stream" / "kafka" / "murmur2.c"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    return [Extension("ledger_stream.kafka._murmur2", [str(source.relative_to(ROOT))],
                      define_macros=[("MURMUR2_DIGEST", f'"{digest}"')])]


setup(ext_modules=compiled_core() + compiled_partitioner()
      if os.environ.get("LEDGER_BUILD_CORE") == "mypyc" else [])
