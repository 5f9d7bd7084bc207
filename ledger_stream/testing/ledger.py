"""An in-memory ledger for unit tests of code that talks to a ``LedgerClient``.

It runs the ledger's own pure ``decide`` on every intent, key by key, as the processor does
on a partition: the receipts (done, duplicate, conflict, held, waiting for approval, ...)
and the dispatches are the real ones for the same intents under the same policy. What it
leaves out is the transport: no Kafka, no connector (``dispatches`` lists what a connector
would apply; nothing applies it), no deadlines firing (no ticks).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Hold
from ledger_stream.domain.decide import DEFAULT_POLICY, decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, absent
from ledger_stream.domain.validation import invalid_reason
from ledger_stream.sdk.client import LedgerClient
from ledger_stream.sdk.errors import InvalidIntentError, raise_for
from ledger_stream.serde import AvroCodec


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class InMemoryLedger:
    """``intent``, ``submit`` and ``status`` of ``LedgerClient``, decided in memory.

    ``hold``: the freezes in force (containment), if any: as in the processor, a freeze
    holds only the intents of the (tenant, action) it covers; a Hold without a freeze (an
    ``approval`` one alone) applies to every intent. ``policy``: the processor's policy
    (default: the processor's default); ``now_ms``: the partition clock (default: the wall
    clock; pass a function for deterministic tests).
    """

    def __init__(self, hold: Hold | None = None, policy: Policy = DEFAULT_POLICY,
                 now_ms: Callable[[], int] = _wall_clock_ms) -> None:
        self.hold = hold
        self.policy = policy
        self.now_ms = now_ms
        self.states: dict[str, KeyState] = {}
        self.intents: list[ev.Intent] = []
        self.dispatches: list[ev.Dispatch] = []
        self.receipts: list[ev.Receipt] = []
        self.codec = AvroCodec()

    def intent(self, key: str, action: str, target: str, args: Any, **kw: Any) -> ev.Intent:
        """The Intent ``LedgerClient.intent`` would build (same validation, same hashes)."""
        return LedgerClient.intent(self, key, action, target, args, **kw)  # type: ignore[arg-type]

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        """Decide ``intent`` against its key's state; the receipt answering it. As
        ``LedgerClient.submit``: with ``raise_errors`` a "no" (rejected, held, failed) raises
        its error (``ledger_stream.sdk``); an intent the processor would dead-letter (built
        by hand, or changed after ``intent``) raises InvalidIntentError and is not recorded."""
        problem = invalid_reason(intent, intent.key)
        if problem is not None:  # as LedgerClient.submit: no receipt would ever come
            raise InvalidIntentError(f"{intent.key}: {problem}")
        self.intents.append(intent)
        state = self.states.get(intent.key) or absent(intent.key)
        decision = decide(state, intent, self.policy, self.now_ms(), self._hold_for(intent))
        self.states[intent.key] = decision.state
        self.dispatches += [o for o in decision.outputs if isinstance(o, ev.Dispatch)]
        receipts = [o for o in decision.outputs if isinstance(o, ev.Receipt)]
        self.receipts += receipts
        receipt = next((r for r in receipts if r.intent_event_id == intent.event_id),
                       receipts[-1])
        return raise_for(receipt) if raise_errors else receipt

    def _hold_for(self, intent: ev.Intent) -> Hold | None:
        # The processor passes decide only the freezes covering the key's (tenant, action).
        freeze = self.hold.freeze if self.hold is not None else None
        if freeze is not None and not freeze.covers(intent.tenant, intent.action):
            return None
        return self.hold

    def status(self, key: str, wait: float = 2.0) -> ev.Receipt | None:
        """The key's latest receipt, None when it has none."""
        found = [r for r in self.receipts if r.key == key]
        return found[-1] if found else None


# The name this repository's tests knew it by.
DecideLedger = InMemoryLedger


class SilentLedger(InMemoryLedger):
    """Records the intent (the ledger decides it), but no receipt comes within the wait."""

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        super().submit(intent, wait, raise_errors=raise_errors)
        raise TimeoutError(f"no receipt for {intent.key} within the wait")
