"""The setup ``upgrade-check`` and ``replay-plan`` share: a graph loaded from MODULE:ATTR,
a process that cannot produce to the ledger, the processor's policy, the checkpointer
opened read-only and the ledger read through :class:`ledger_stream.upgrade.KafkaLedger`,
with every failure to read either turned into one CliError line.

Guarantee: :func:`prepare` forbids producing before the graph's module is imported, so
nothing this process runs (a thread a tool starts itself included) writes to the ledger.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ledger_stream.cli.checkpointer import open_checkpointer
from ledger_stream.cli.common import CliError, kafka_failure, settings_from
from ledger_stream.config import Settings


def load_object(spec: str, flag: str) -> Any:
    """The object MODULE:ATTR names (the current folder importable, as uvicorn does)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CliError(f"{flag} {spec!r}: expected MODULE:ATTR")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises on import
        raise CliError(f"{flag} {spec!r}: cannot import {module_name}: "
                       f"{type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(found, part):
            raise CliError(f"{flag} {spec!r}: {module_name} has no {attr}")
        found = getattr(found, part)
    return found


def load_instance(spec: str, flag: str, kind: type, what: str, *,
                  quote_errors: bool = True) -> Any:
    """The ``kind`` instance MODULE:ATTR names, or returns when called with no arguments.
    ``quote_errors`` False: a failing factory's message is not repeated (it may hold a
    credential it was given)."""
    found = load_object(spec, flag)
    if not isinstance(found, kind) and callable(found):
        try:
            found = found()
        except Exception as exc:
            said = f": {exc}" if quote_errors else ""
            raise CliError(f"{flag} {spec!r}: calling it (with no arguments) failed: "
                           f"{type(exc).__name__}{said}") from exc
    if not isinstance(found, kind):
        raise CliError(f"{flag} {spec!r} is not {what} ({type(found).__name__})")
    return found


def graph_from(spec: str) -> Any:
    """The compiled graph MODULE:ATTR names (or returns, when called with no arguments)."""
    from langgraph.pregel import Pregel

    return load_instance(spec, "--graph", Pregel, "a compiled LangGraph graph")


@dataclass(frozen=True)
class DryRun:
    settings: Settings
    policy: Any  # ledger_stream.processor.policy.Policy: the processor's, to decide as it would
    graph: Any
    resume: Callable[[str, Any], Any] | None


def prepare(args: argparse.Namespace, command: str) -> DryRun:
    """Settings, policy, graph and --resume of a dry-run command, producing forbidden."""
    from ledger_stream.kafka.producer import forbid_producing
    from ledger_stream.processor.policy import ConfigError, policy_from

    settings = settings_from(args, consumer_group=args.group)
    # Before the graph's module is imported: nothing of this process writes to the ledger,
    # even code that runs outside the dry run's context (a thread a tool starts itself).
    forbid_producing(f"{command} is a dry run")
    try:
        policy = policy_from(settings)
    except ConfigError as exc:
        raise CliError(f"{exc} ({command} decides as the processor would)") from exc
    graph = graph_from(args.graph)
    resume = load_object(args.resume, "--resume") if args.resume else None
    if resume is not None and not callable(resume):
        raise CliError(f"--resume {args.resume!r} is not callable")
    return DryRun(settings, policy, graph, resume)


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def checkpointer_and_ledger(dsn: str, settings: Settings) -> Iterator[tuple[Any, Any]]:
    """(saver, ledger): the checkpointer read-only and the ledger to read; a failure of
    either while the block runs is one CliError line."""
    from confluent_kafka import KafkaException

    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.serde import make_codec
    from ledger_stream.upgrade import KafkaLedger
    from ledger_stream.upgrade.check import LedgerBehind

    with open_checkpointer(dsn) as saver:
        try:
            yield saver, KafkaLedger(settings, resolve_bootstrap(settings),
                                     make_codec(settings.connection.schema_registry_url),
                                     progress)
        except (LookupError, LedgerBehind, KafkaSetupError) as exc:
            raise CliError(str(exc)) from exc
        except KafkaException as exc:
            raise kafka_failure(exc, "cannot read the ledger") from exc
        except sqlite3.Error as exc:
            raise CliError(f"--checkpointer: {exc}") from exc
