"""Entry point of the ``ledger-stream`` command.

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``handler``. The product's commands are listed here; other installed
packages add theirs through the entry point group ``ledger_stream.commands`` (each entry
names such a module): the lab (``ledger_lab``: kafka, sandbox, demo, falsify, bench,
simulate, fuzz, chaos) is one, and the product never imports it. Flags fall back to
``LEDGER_*`` environment variables (shown in ``--help``) through
:class:`ledger_stream.config.Settings`.

A command line imports only the module of the command it names (``ledger-stream processor``
imports ``processor_cmd`` and none of the others); ``ledger-stream --help`` lists the
product's commands from :data:`COMMANDS` without importing any of their modules.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from importlib import import_module, metadata
from importlib.util import find_spec
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from ledger_stream.cli.common import CliError, printable
from ledger_stream.core import running as core_running
from ledger_stream.kafka.exceptions import client_config_refusal
from ledger_stream.logs import configure_logging

if TYPE_CHECKING:
    Registration = Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]


class Command(Protocol):
    """A command module: adds its parser (which sets ``handler``) to the subparsers."""

    def register(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        ...


class CommandModule:
    """One of the product's command modules, imported only when a parser needs its
    commands: its name and the commands it adds, each with the help line its parser gives
    (what a listing shows; tests/test_lazy_imports.py holds them equal to the module's)."""

    def __init__(self, module: str, commands: dict[str, str]) -> None:
        self.__name__ = f"ledger_stream.cli.{module}"
        self.commands = commands

    def register(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        """The module's own parsers (it is imported here)."""
        import_module(self.__name__).register(subparsers)

    def register_listed(self,
                        subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        """A parser per command with its help line only: enough to list it."""
        for name, summary in self.commands.items():
            subparsers.add_parser(name, help=summary)


# In the order ``ledger-stream --help`` lists them.
COMMANDS: tuple[CommandModule, ...] = (
    CommandModule("topics_cmd", {"topics": "create the ledger topics"}),
    CommandModule("acls_cmd", {"acls": "apply the ledger's Kafka ACLs"}),
    CommandModule("processor_cmd", {
        "processor": "run the ledger processor (intents + attempts -> receipts, dispatch, "
                     "alerts)"}),
    CommandModule("connector_cmd", {
        "connector": "run a connector: apply dispatched effects to a target"}),
    CommandModule("view_cmd", {
        "view": "serve the view: each key's latest receipt (status) and timeline (inspect)"}),
    CommandModule("receipts_cmd", {
        "receipts": "print a key's receipts (or only its latest, from the view)"}),
    CommandModule("alerts_cmd", {"alerts": "print the ledger's alerts (and follow new ones)"}),
    CommandModule("inspect_cmd", {
        "inspect": "a key's timeline: one row per event, from every ledger topic"}),
    CommandModule("evidence_cmd", {
        "evidence": "everything known about a key, as one redacted JSON file"}),
    CommandModule("reconcile_cmd", {
        "reconcile": "list and resolve keys waiting for an operator"}),
    CommandModule("freeze_cmd", {
        "freeze": "hold every new dispatch of an action (containment)",
        "unfreeze": "release an action's held dispatches, in order",
        "freezes": "list the freezes in force"}),
    CommandModule("approve_cmd", {
        "approve": "sign an approval of a key's arguments (prints JSON)",
        "approval-keys": "make approver keys"}),
    CommandModule("mcp_cmd", {
        "mcp": "serve the ledger as an MCP server (submit_effect, get_operation, "
               "list_unresolved)"}),
    CommandModule("api_cmd", {
        "api": "the HTTP gateway: submit intents, read operations, alerts, timelines"}),
    CommandModule("watch_cmd", {
        "watch": "watch a target's own effects and report them to the ledger"}),
    CommandModule("upgrade_cmd", {
        "upgrade-check": "before deploying a new graph version: what it would do to the "
                         "threads in flight"}),
    CommandModule("repartition_cmd", {
        "repartition": "grow the ledger topics to N partitions, moving every key's state"}),
    CommandModule("replay_cmd", {
        "replay-plan": "which checkpoint of a thread a replay is safe from"}),
    CommandModule("drain_cmd", {
        "drain": "the keys in flight for a workflow version; hold its new intents"}),
)
COMMAND_PLUGINS = "ledger_stream.commands"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command, each command module imported."""
    return _parser([*(c.register for c in COMMANDS), *(c.register for c in plugin_commands())])


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser ``argv`` needs; parsing ``argv`` with it does what parsing it with
    :func:`build_parser`'s does. A command line starting with a command's name gets that
    command's module only; one naming no command (``--help``, ``--version``, nothing, an
    unknown word) the list of every command, the product's from :data:`COMMANDS` without
    their modules; one with options before the command's name, the full parser."""
    at, name = next(((i, word) for i, word in enumerate(argv) if not word.startswith("-")),
                    (0, ""))
    if at > 0:  # e.g. `-h processor`: the top-level options read the full parser
        return build_parser()
    for command in COMMANDS:
        if name in command.commands:
            return _parser([command.register])
    if name and (plugin := plugin_command(name)) is not None:
        return _parser([plugin.register])
    return _parser([*(c.register_listed for c in COMMANDS),
                    *(c.register for c in plugin_commands())])


def _parser(registrations: Iterable[Registration]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ledger-stream",
        description="Effectively-once side effects for AI agents, on Kafka.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in registrations:
        register(subparsers)
    add_version_flags(parser, version_text)
    return parser


def version_text() -> str:
    """What ``--version`` prints: the version and the decision core this process runs."""
    return f"ledger-stream {package_version()} ({core_running()} core)"


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


def plugin_command(name: str) -> Command | None:
    """The installed command module declared for the command ``name``, imported; None if
    there is none, or it fails to import (the list of every command then names it)."""
    for entry in metadata.entry_points(group=COMMAND_PLUGINS):
        if entry.name == name and package_installed(entry):
            try:
                loaded: Command = entry.load()
            except Exception:
                return None
            return loaded
    return None


def package_installed(entry: metadata.EntryPoint) -> bool:
    """Whether the top-level package ``entry`` names can be imported: the distribution
    declares the lab's entry points even where only the product's packages were copied."""
    return find_spec(entry.module.partition(".")[0]) is not None


class _VersionFlag(argparse._VersionAction):
    """``--version`` whose text is made when the flag is given: naming the core imports it,
    which no other command line needs to."""

    def __init__(self, option_strings: Sequence[str], text: str | Callable[[], str],
                 **kwargs: Any) -> None:
        super().__init__(option_strings, **kwargs)
        self.text = text

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        self.version = self.text if isinstance(self.text, str) else self.text()
        super().__call__(parser, namespace, values, option_string)


def add_version_flags(parser: argparse.ArgumentParser, version: str | Callable[[], str]) -> None:
    """``--version`` on ``parser`` and on every subcommand's parser below it, so that
    ``ledger-stream kafka up --version`` answers as ``ledger-stream --version`` does (a
    command registered later gets it too: the walk follows the parsers, not a list).
    ``version`` is the text, or a function making it when the flag is given."""
    if "--version" not in parser._option_string_actions:  # drain's names a graph version
        parser.add_argument("--version", action=_VersionFlag, text=version,
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
    return run(parser_for(sys.argv[1:] if argv is None else argv), argv)


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
    except Exception as exc:
        refusal = client_config_refusal(exc)
        if refusal is None:
            raise
        print(f"ledger-stream: error: {printable(refusal)}", file=sys.stderr)
        return 2
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
