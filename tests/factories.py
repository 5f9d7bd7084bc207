"""Event builders for tests: valid by default, every field overridable."""

from __future__ import annotations

import itertools
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json

KEY = "acme/refund/invoice-881"
_ids = itertools.count(1)


def reset_ids() -> None:
    """Number event ids from 1 again (golden files need the same ids on every run)."""
    global _ids
    _ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def intent(key: str = KEY, args: Any = None, at_ms: int = 1_000, **overrides: Any) -> ev.Intent:
    args = {"amount": 100, "to": "cust-1"} if args is None else args
    fields: dict[str, Any] = {
        "event_id": _next_id("intent"),
        "key": key,
        "tenant": key.split("/", 1)[0],
        "action": key.split("/")[1] if key.count("/") >= 2 else "refund",
        "target": "sandbox",
        "args_json": canonical_json(args),
        "args_hash": args_hash(args),
        "workflow": ev.Workflow("refund-agent", "1.0", "thread-1", "refund"),
        "at_ms": at_ms,
    }
    fields.update(overrides)
    return ev.Intent(**fields)


def claim(attempt: int = 1, claim_id: str = "c1", at_ms: int = 2_000, key: str = KEY,
          lease_ms: int = 10_000, fenced: bool = False) -> ev.AttemptClaim:
    return ev.AttemptClaim(_next_id("claim"), key, attempt, claim_id, "conn-0", lease_ms, at_ms,
                           fenced)


def outcome(status: ev.OutcomeStatus, attempt: int = 1, claim_id: str = "c1",
            at_ms: int = 3_000, key: str = KEY, external_id: str = "") -> ev.AttemptOutcome:
    if status is ev.OutcomeStatus.SUCCEEDED and not external_id:
        external_id = f"ext-{attempt}"
    return ev.AttemptOutcome(_next_id("outcome"), key, attempt, claim_id, status, at_ms,
                             external_id)


def reconciled(status: ev.ReconcileStatus, attempt: int = 1, claim_id: str = "c2",
               at_ms: int = 20_000, key: str = KEY, dedup: bool = True,
               external_id: str = "") -> ev.ReconcileResult:
    return ev.ReconcileResult(_next_id("reconcile"), key, attempt, claim_id, status, dedup,
                              at_ms, external_id)


def resolution(res: ev.Resolution, attempt: int = 1, at_ms: int = 30_000, key: str = KEY,
               external_id: str = "") -> ev.OperatorResolution:
    return ev.OperatorResolution(_next_id("operator"), key, attempt, res, "ops@acme", at_ms,
                                 external_id)


RELEASE_AT_MS = 20_000


def now_of(event: ev.InputEvent) -> int:
    """The partition time an event is decided at in these tests: its own stamp (the runtime
    uses the broker's record timestamp instead)."""
    if isinstance(event, ev.Timer):
        return event.due_ms
    if isinstance(event, ev.Release):
        return RELEASE_AT_MS  # the time of the unfreeze record that released the key
    return event.at_ms
