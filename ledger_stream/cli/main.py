"""Entry point of the ``ledger-stream`` command.

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``handler``. The product's commands are listed here; other installed
packages add theirs through the entry point group ``ledger_stream.commands`` (each entry
names such a module): the lab (``ledger_lab``: kafka, sandbox, demo, falsify, bench,
simulate, fuzz, chaos) is one, and the product never imports it. Flags fall back to
``LEDGER_*`` environment variables (shown in ``--help``) through
:class:`ledger_stream.config.Settings`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from importlib.util import find_spec
from types import FrameType
from typing import Any, Protocol

from ledger_stream.cli import (
    acls_cmd,
    alerts_cmd,
    api_cmd,
    approve_cmd,
    connector_cmd,
    drain_cmd,
    evidence_cmd,
    freeze_cmd,
    inspect_cmd,
    mcp_cmd,
    processor_cmd,
    receipts_cmd,
    reconcile_cmd,
    repartition_cmd,
    replay_cmd,
    topics_cmd,
    upgrade_cmd,
    view_cmd,
    watch_cmd,
)
from ledger_stream.cli.common import CliError, printable
from ledger_stream.core import running as core_running
from ledger_stream.logs import configure_logging


class Command(Protocol):
    """A command module: adds its parser (which sets ``handler``) to the subparsers."""

    def register(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        ...


COMMANDS: tuple[Command, ...] = (
    topics_cmd, acls_cmd, processor_cmd, connector_cmd, view_cmd, receipts_cmd,
    alerts_cmd, inspect_cmd, evidence_cmd, reconcile_cmd, freeze_cmd, approve_cmd, mcp_cmd,
    api_cmd, watch_cmd, upgrade_cmd, repartition_cmd, replay_cmd, drain_cmd,
)
COMMAND_PLUGINS = "ledger_stream.commands"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ledger-stream",
        description="Effectively-once side effects for AI agents, on Kafka.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in (*COMMANDS, *plugin_commands()):
        command.register(subparsers)
    add_version_flags(parser, f"ledger-stream {package_version()} ({core_running()} core)")
    return parser


def plugin_commands() -> list[Command]:
    """The command modules installed packages declare (entry points of ``COMMAND_PLUGINS``),
    sorted by name. One that fails to import is named on stderr and left out, so the
    product's own commands keep working; one whose package is not installed at all (the
    product installed without the lab, as the container image is) is left out quietly."""
    commands = []
    for entry in sorted(metadata.entry_points(group=COMMAND_PLUGINS), key=lambda e: e.name):
        if not package_installed(entry):
            continue
        try:
            commands.append(entry.load())
        except Exception as exc:  # a broken plugin must not take the product's CLI down
            print(f"ledger-stream: command {entry.name!r} ({entry.value}) not loaded: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
    return commands


def package_installed(entry: metadata.EntryPoint) -> bool:
    """Whether the top-level package ``entry`` names can be imported: the distribution
    declares the lab's entry points even where only the product's packages were copied."""
    return find_spec(entry.module.partition(".")[0]) is not None


def add_version_flags(parser: argparse.ArgumentParser, version: str) -> None:
    """``--version`` on ``parser`` and on every subcommand's parser below it, so that
    ``ledger-stream kafka up --version`` answers as ``ledger-stream --version`` does (a
    command registered later gets it too: the walk follows the parsers, not a list)."""
    if "--version" not in parser._option_string_actions:  # drain's names a graph version
        parser.add_argument("--version", action="version", version=version,
                            help="print the installed version and exit")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():  # aliases once
                add_version_flags(sub, version)


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's, as pip recorded it)."""
    try:
        return metadata.version("ledger-stream")
    except metadata.PackageNotFoundError:  # imported from a source tree never installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser(), argv)


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` with ``parser`` and run the chosen command's handler: the exit status
    (2 on a CliError, 130 on Ctrl-C; SIGTERM ends it through its ``finally`` blocks)."""
    args = parser.parse_args(argv)
    try:  # the flag's level; the command's settings may then apply LEDGER_LOG_LEVEL or a file
        configure_logging(getattr(args, "log_level", None))
    except ValueError as exc:
        parser.error(str(exc))
    previous = _stop_cleanly_on_sigterm()
    try:
        return int(args.handler(args) or 0)
    except CliError as exc:
        # Errors quote keys, details and names read from the topics: shown, never acted on.
        print(f"ledger-stream: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: FrameType | None) -> None:
    # One is enough: a second SIGTERM (a process manager sending it again) would interrupt
    # the finally blocks it started and leave processes running. A cleanup that hangs is
    # still ended by the sender's SIGKILL; main() restores the handler when it returns.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def _stop_cleanly_on_sigterm() -> Any:
    """SIGTERM ends a command as Ctrl-C does: through its ``finally`` blocks, which stop the
    processes it started (a local Kafka, a processor, a sandbox) by their PIDs. Python's
    default for SIGTERM ends the process at once and left them running: a benchmark stopped
    by SIGTERM left its broker and its processor behind. Commands that stop gracefully on
    SIGTERM (processor, connector, ...) install their own handler over this one. Returns
    the handler to restore, None off the main thread (signals are the main thread's)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminated)


if __name__ == "__main__":
    sys.exit(main())
