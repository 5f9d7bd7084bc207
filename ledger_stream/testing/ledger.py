"""A ledger behind the LedgerClient interface that runs the project's own pure ``decide``:
the receipts and the dispatches (what a connector would apply) are the real ones, without
Kafka. For tests of what the agent integrations make of the ledger's answers."""

from __future__ import annotations

import time
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Hold
from ledger_stream.domain.decide import DEFAULT_POLICY, decide
from ledger_stream.domain.state import KeyState, absent
from ledger_stream.sdk.client import LedgerClient
from ledger_stream.serde import AvroCodec


class DecideLedger:
    def __init__(self, hold: Hold | None = None) -> None:
        """``hold``: the freeze every decision runs under (containment), if any."""
        self.hold = hold
        self.states: dict[str, KeyState] = {}
        self.intents: list[ev.Intent] = []
        self.dispatches: list[ev.Dispatch] = []
        self.receipts: list[ev.Receipt] = []
        self.codec = AvroCodec()

    def intent(self, key: str, action: str, target: str, args: Any, **kw: Any) -> ev.Intent:
        return LedgerClient.intent(self, key, action, target, args, **kw)  # type: ignore[arg-type]

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        self.intents.append(intent)
        state = self.states.get(intent.key) or absent(intent.key)
        decision = decide(state, intent, DEFAULT_POLICY, int(time.time() * 1000), self.hold)
        self.states[intent.key] = decision.state
        self.dispatches += [o for o in decision.outputs if isinstance(o, ev.Dispatch)]
        receipts = [o for o in decision.outputs if isinstance(o, ev.Receipt)]
        self.receipts += receipts
        return next((r for r in receipts if r.intent_event_id == intent.event_id),
                    receipts[-1])

    def status(self, key: str, wait: float = 2.0) -> ev.Receipt | None:
        found = [r for r in self.receipts if r.key == key]
        return found[-1] if found else None


class SilentLedger(DecideLedger):
    """Records the intent (the ledger decides it), but no receipt comes within the wait."""

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        super().submit(intent, wait, raise_errors=raise_errors)
        raise TimeoutError(f"no receipt for {intent.key} within the wait")
