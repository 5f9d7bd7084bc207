"""Start-up stays cheap: ``import ledger_stream`` loads none of the libraries behind it, its
public names import on first use, and ``ledger-stream`` imports only the module of the
command it runs (``--help`` none of them), each parser still the one every command had.

The checks run fresh interpreters and read ``sys.modules``: they fail on the import that
brings a library back, never on a timing (docs/benchmarks.md measures the time).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

import ledger_stream
from ledger_stream.cli import main as cli

# What every process that imports ledger_stream paid before it used any of it.
HEAVY = ("confluent_kafka", "pydantic", "pydantic_settings", "fastavro", "rocksdict",
         "prometheus_client")
REPO = Path(__file__).resolve().parents[1]

# Runs the command line given as arguments in-process, as the installed `ledger-stream`
# does, then prints what it imported (stdout has the command's own output before it).
RUN_COMMAND = """
import json, sys
from ledger_stream.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def _run(*argv: str) -> tuple[str, list[str]]:
    """The output of ``ledger-stream *argv`` run in a fresh interpreter, and its modules."""
    done = subprocess.run([sys.executable, "-c", RUN_COMMAND, *argv], capture_output=True,
                          text=True, timeout=60, cwd=REPO, env={**os.environ, "COLUMNS": "100"})
    out, _, modules = done.stdout.rpartition("\nMODULES ")
    assert modules, done.stderr
    return out, json.loads(modules)


def _heavy(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def _command_modules(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith("ledger_stream.cli.")
                  and m.endswith("_cmd"))


def test_importing_the_package_loads_only_the_core_choice() -> None:
    probe = "import json, sys, ledger_stream; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout)
    assert _heavy(modules) == []
    assert [m for m in modules if m.split(".")[0] in ("cryptography", "orjson")] == []
    # ledger_stream.domain._sources: the build's digest, which the core's choice reads
    loaded = {m for m in modules if m.startswith("ledger_stream")}
    assert loaded - {"ledger_stream.domain._sources"} == {"ledger_stream", "ledger_stream.core"}


def test_each_public_name_imports_on_first_use_from_its_module() -> None:
    homes = ledger_stream._HOMES
    assert sorted(n for names in homes.values() for n in names) == sorted(ledger_stream.__all__)
    for module, names in homes.items():
        for name in names:
            assert getattr(ledger_stream, name) is getattr(importlib.import_module(module), name)
    assert set(ledger_stream.__all__) <= set(dir(ledger_stream))
    with pytest.raises(AttributeError, match="no attribute 'LedgerClients'"):
        _ = ledger_stream.LedgerClients  # type: ignore[attr-defined]


def test_type_checkers_see_the_same_names_from_the_same_modules() -> None:
    tree = ast.parse(Path(ledger_stream.__file__).read_text())
    (block,) = [node for node in tree.body if isinstance(node, ast.If)
                and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]
    seen: dict[str, list[str]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module
        seen.setdefault(node.module, []).extend(alias.name for alias in node.names)
    assert {m: sorted(n) for m, n in seen.items()} == \
        {m: sorted(n) for m, n in ledger_stream._HOMES.items()}


def test_help_lists_every_command_without_importing_their_modules(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out, modules = _run("--help")
    assert _heavy(modules) == []
    assert _command_modules(modules) == []
    monkeypatch.setenv("COLUMNS", "100")
    assert out == cli.build_parser().format_help()  # what the full parser says, word for word


def test_a_command_imports_its_own_module_only() -> None:
    out, modules = _run("processor", "--help")
    assert "usage: ledger-stream processor" in out
    assert _heavy(modules) == []
    assert _command_modules(modules) == ["ledger_stream.cli.processor_cmd"]


def _command_paths(parser: argparse.ArgumentParser,
                   path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _command_paths(sub, (*path, name))


def _parsed(parser: argparse.ArgumentParser, argv: list[str],
            capsys: pytest.CaptureFixture[str]) -> tuple[object, ...]:
    """What parsing ``argv`` gives: the exit status and output, or the parsed values."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        printed = capsys.readouterr()
        return exit_.code, printed.out, printed.err
    return 0, sorted((k, repr(v)) for k, v in vars(args).items()), ""


def test_every_command_line_parses_as_with_the_full_parser(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    full = cli.build_parser()
    paths = list(_command_paths(full))
    assert ("kafka", "up") in paths and ("freezes",) in paths and len(paths) > 30
    lines = [[], ["no-such-command"], ["--version"], ["-h", "processor"], ["--", "freeze"],
             ["-x", "processor", "--group", "g"], ["-1", "topics"]]
    for path in paths:
        lines += [[*path, "--help"], [*path], [*path, "--no-such-flag"]]
    for argv in lines:
        assert _parsed(cli.parser_for(argv), argv, capsys) == _parsed(full, argv, capsys), argv


def test_a_broken_plugin_named_on_its_command_line_is_named_once(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    broken = metadata.EntryPoint("broken", "ledger_stream.no_such_cmd", cli.COMMAND_PLUGINS)
    monkeypatch.setattr(cli.metadata, "entry_points", lambda group: [broken])
    with pytest.raises(SystemExit) as done:
        cli.main(["broken"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("'broken' (ledger_stream.no_such_cmd) not loaded") == 1
    assert "invalid choice: 'broken'" in err
