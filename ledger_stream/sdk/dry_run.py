"""A dry run: code that submits intents runs, but nothing reaches the ledger.

Inside ``with dry_run(probe):`` every ``LedgerClient.submit`` (and the async client's) of
this context (and of the threads and tasks that copy it, as LangGraph's executors and
``asyncio.to_thread`` do) hands its intent to ``probe`` and returns the probe's receipt,
never producing anything; producing an intent raises DryRunViolation. ``ledger-stream
upgrade-check`` runs a new graph's resumed threads this way (ledger_stream/upgrade/).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import refuse_if_forbidden


class Probe(Protocol):
    def answer(self, intent: ev.Intent) -> ev.Receipt:
        """The receipt the ledger would give ``intent``; records that it was asked."""
        ...


class DryRunViolation(RuntimeError):
    """Something tried to produce an intent during a dry run."""


_PROBE: ContextVar[Probe | None] = ContextVar("ledger_stream_dry_run", default=None)


def current() -> Probe | None:
    """The probe of the dry run this code runs in, or None."""
    return _PROBE.get()


@contextmanager
def dry_run(probe: Probe) -> Iterator[Probe]:
    token = _PROBE.set(probe)
    try:
        yield probe
    finally:
        _PROBE.reset(token)


def refuse_in_dry_run(intent: ev.Intent) -> None:
    """Raise DryRunViolation when called during a dry run, ProducingForbidden in a process
    that must never write to the ledger (the guards before a produce)."""
    if _PROBE.get() is not None:
        raise DryRunViolation(f"an intent for {intent.key} was about to be produced "
                              "during a dry run")
    refuse_if_forbidden(f"the intent for {intent.key}")
