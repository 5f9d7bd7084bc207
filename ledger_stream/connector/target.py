"""The interface a connector implements: apply an effect, look it up by key, classify errors.

A ``Target`` is one kind of external system (an HTTP API, a PostgreSQL database, an SMTP
relay). The connector runtime (``runtime.py``) owns the protocol (claims, grants, leases,
outcomes, reconciliation); a Target only talks to its system.

What a Target must guarantee:

- ``apply`` sends the effect with ``request.key`` as the system's idempotency key (and
  ``request.attempt_id`` where the system can record it). It returns the system's own
  receipt id on success and raises otherwise. It must not retry internally: retries are
  the ledger's decision, made with the same key.
- ``classify`` maps what ``apply`` raised to an outcome. ``NOT_APPLIED`` only when the
  effect certainly did not happen (the request never left, or the system says it rejected
  it before committing, retryably); ``FAILED`` for a permanent rejection; ``UNKNOWN`` for
  anything after the request may have reached the system (timeouts, dropped connections,
  ambiguous errors). When in doubt: ``UNKNOWN``; it costs one lookup, a wrong
  ``NOT_APPLIED`` can cost a second effect.
- ``lookup`` asks the system whether an effect for ``key`` exists: its receipt id, or None
  when the system is sure there is none. It raises ``LookupUnavailable`` when it cannot
  tell (no lookup API, system down).
- ``deduplicates`` is True only when the system itself refuses a second effect for one key
  (returning the original receipt). Only such targets take the fast path (call before the
  grant arrives) and get automatic resends after a lookup found nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger_stream.domain.events import OutcomeStatus


@dataclass(frozen=True, slots=True)
class EffectRequest:
    key: str
    attempt: int
    attempt_id: str  # the claim id: new for every try
    action: str
    args: dict[str, Any]
    args_hash: str
    payload: dict[str, Any] = field(default_factory=dict)


class TargetError(Exception):
    """Base of the errors a Target raises from ``apply``; ``classify`` decides their outcome.

    Its message is recorded in the attempt's outcome and logged (``redaction.summary``), so
    the Target writes it from what it controls (a status, a code, a phase) and never quotes
    the target's answer or a client library's message: such text goes in as its length
    (``redaction.withheld``). Any other exception is recorded as its class alone."""


class LookupUnavailable(TargetError):
    """The target cannot say whether an effect for the key exists."""


class Target(ABC):
    name: str
    deduplicates: bool = False
    queryable: bool = True  # False: ``lookup`` always raises LookupUnavailable (no API)

    @abstractmethod
    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        """Apply the effect; return the target's receipt id. Raises on any failure."""

    def start_apply(self, request: EffectRequest, timeout_s: float,
                    done: Callable[[str, Exception | None], None]) -> bool:
        """``apply`` without holding the caller's thread, where the Target can: True when
        started, and then ``done(receipt_id, None)`` or ``done("", what apply would have
        raised)`` is called exactly once, from another thread, within ``timeout_s``. False
        (the default) when it cannot: nothing was sent, ``done`` is never called, and the
        caller calls ``apply`` on a thread of its own."""
        return False

    @abstractmethod
    def classify(self, error: Exception) -> OutcomeStatus:
        """NOT_APPLIED, FAILED or UNKNOWN for an exception raised by ``apply``."""

    @abstractmethod
    def lookup(self, key: str, timeout_s: float) -> str | None:
        """The receipt id of the effect for ``key``, None if certainly absent."""

    def close(self) -> None:  # noqa: B027 - optional hook, most targets hold nothing open
        """Release connections. Called once when the connector stops."""
