"""An in-memory Target for unit tests and examples: deduplicates by key like a careful API,
and can be told to fail the next call in any of the ways a real system fails."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target, TargetError
from ledger_stream.domain.events import OutcomeStatus


class NotAppliedError(TargetError):
    """The memory target refused before applying (retryable)."""


class RejectedError(TargetError):
    """The memory target refused permanently (e.g. same key, other arguments)."""


class AmbiguousError(TargetError):
    """The memory target applied the effect, but the caller never heard."""


class MemoryTarget(Target):
    """``effects`` maps key -> (receipt id, args hash, attempt id): the target's own ledger."""

    def __init__(self, name: str = "memory", deduplicates: bool = True,
                 queryable: bool = True) -> None:
        self.name = name
        self.deduplicates = deduplicates
        self.queryable = queryable
        self.effects: dict[str, tuple[str, str, str]] = {}
        self.calls: list[EffectRequest] = []
        self._lock = threading.Lock()
        self._next_fault: Callable[[EffectRequest], None] | None = None

    def fail_next(self, how: str) -> None:
        """"refuse" (not applied), "reject" (permanent), "drop" (applied, then lost)."""
        def fault(request: EffectRequest) -> None:
            if how == "refuse":
                raise NotAppliedError("refused before applying")
            if how == "reject":
                raise RejectedError("rejected permanently")
            self._record(request)
            raise AmbiguousError("connection dropped after the effect")
        self._next_fault = fault

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        with self._lock:
            self.calls.append(request)
            fault, self._next_fault = self._next_fault, None
            if fault is not None:
                fault(request)
            return self._record(request)

    def _record(self, request: EffectRequest) -> str:
        existing = self.effects.get(request.key)
        if existing is not None and self.deduplicates:
            if existing[1] != request.args_hash:
                raise RejectedError("idempotency key reused with other arguments")
            return existing[0]
        receipt = f"mem-{len(self.effects) + 1}"
        if existing is not None:  # a target without dedup applies twice
            self.effects[f"{request.key}#dup{len(self.effects)}"] = (
                receipt, request.args_hash, request.attempt_id)
        else:
            self.effects[request.key] = (receipt, request.args_hash, request.attempt_id)
        return receipt

    def classify(self, error: Exception) -> OutcomeStatus:
        if isinstance(error, NotAppliedError):
            return OutcomeStatus.NOT_APPLIED
        if isinstance(error, RejectedError):
            return OutcomeStatus.FAILED
        return OutcomeStatus.UNKNOWN

    def lookup(self, key: str, timeout_s: float) -> str | None:
        if not self.queryable:
            raise LookupUnavailable(f"{self.name} has no lookup")
        with self._lock:
            found = self.effects.get(key)
        return found[0] if found else None

    def effect_count(self, key: str) -> int:
        return sum(1 for k in self.effects if k == key or k.startswith(key + "#dup"))
