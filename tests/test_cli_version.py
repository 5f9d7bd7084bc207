"""``ledger-stream --version``: the installed command names the version pyproject.toml gives,
and every command and subcommand of the CLI's parser table accepts the flag."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_stream.cli.main import build_parser, main, package_version
from ledger_stream.core import running

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_every_installed_entry_point_prints_the_package_version():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["scripts"]
    for name in project["scripts"]:
        command = Path(sys.executable).parent / name  # as pip installed it
        done = subprocess.run([str(command), "--version"], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        # ledger-stream also names the decision core it runs (compiled or pure)
        core = f" ({running()} core)" if name == "ledger-stream" else ""
        assert done.stdout.strip() == f"{name} {project['version']}{core}"


def command_paths(parser: argparse.ArgumentParser,
                  path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command the CLI's own parser table holds, as the words that name it."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from command_paths(sub, (*path, name))


# Commands whose own --version takes a value (drain: the workflow version). An argless
# ``--version`` there is a usage error (exit 2), never a success a script would read as
# "nothing in flight".
VALUED_VERSION = {("drain",)}


def test_every_command_and_subcommand_answers_version(
        capsys: pytest.CaptureFixture[str]) -> None:
    paths = list(command_paths(build_parser()))
    assert ("kafka", "up") in paths and ("api",) in paths and len(paths) > 30
    for path in paths:
        if path in VALUED_VERSION:
            with pytest.raises(SystemExit) as done:
                main([*path, "--version"])
            assert done.value.code == 2, path
            assert "--version: expected one argument" in capsys.readouterr().err
            continue
        with pytest.raises(SystemExit) as done:
            main([*path, "--version"])
        printed = capsys.readouterr()
        assert done.value.code == 0, (path, printed.err)
        assert printed.out.strip() == f"ledger-stream {package_version()} ({running()} core)", \
            path
