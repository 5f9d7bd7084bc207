"""Fault injection: the ambiguous outcomes a real payment API can produce, on demand.

A :class:`Fault` is armed for the next ``times`` POSTs of a *new* idempotency key (optionally
only for one exact key); a replay of an existing key is never faulted. Faults live in memory:
a restart clears them, except those given again on the command line.

Modes, as a client sees them:

- ``commit_then_drop``: the effect is committed, the connection is closed with no response.
- ``delay_before_commit``: the server waits ``delay_s`` (default 5 s), then commits and
  answers normally; a client with a shorter timeout gives up before the commit.
- ``error_before_commit``: 503 with ``Retry-After: 0``; nothing is committed.
- ``decline``: 402 ``card_declined`` whose message is the fault's ``message`` (a real
  payments API may echo the card number there); nothing is committed.
- ``crash_before_commit``: the process exits with status 70; nothing is committed.
- ``crash_after_commit``: the effect is committed, then the process exits with status 71.

Every mode first waits ``delay_s`` (default 0 except for ``delay_before_commit``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

FAULT_MODES = (
    "commit_then_drop",
    "delay_before_commit",
    "error_before_commit",
    "decline",
    "crash_before_commit",
    "crash_after_commit",
)
DEFAULT_DELAY_S = {"delay_before_commit": 5.0}
DEFAULT_DECLINE = "the card was declined"
EXIT_CRASH_BEFORE_COMMIT = 70
EXIT_CRASH_AFTER_COMMIT = 71


class InvalidFault(ValueError):
    """A fault specification names an unknown mode or a bad count or delay."""


@dataclass(frozen=True, slots=True)
class Fault:
    mode: str
    times: int = 1
    key: str | None = None  # None: any new key
    delay_s: float | None = None
    message: str | None = None  # the decline's message; None: DEFAULT_DECLINE

    def __post_init__(self) -> None:
        if self.mode not in FAULT_MODES:
            raise InvalidFault(f"unknown fault mode {self.mode!r}; one of {', '.join(FAULT_MODES)}")
        if isinstance(self.times, bool) or not isinstance(self.times, int) or self.times < 1:
            raise InvalidFault(f"times must be an integer >= 1, not {self.times!r}")
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            raise InvalidFault("key must be a non-empty string or null")
        if self.delay_s is not None and (
            isinstance(self.delay_s, bool) or not isinstance(self.delay_s, int | float)
            or not 0 <= self.delay_s <= 3600
        ):
            raise InvalidFault(f"delay_s must be a number of seconds in [0, 3600], "
                               f"not {self.delay_s!r}")
        if self.message is not None and (not isinstance(self.message, str)
                                         or len(self.message) > 4096):
            raise InvalidFault("message must be a string of at most 4096 characters or null")

    @property
    def delay(self) -> float:
        """Seconds to wait before the fault acts."""
        if self.delay_s is not None:
            return float(self.delay_s)
        return DEFAULT_DELAY_S.get(self.mode, 0.0)

    @classmethod
    def from_json(cls, value: Any) -> Fault:
        """From a ``POST /v1/faults`` body. Raises InvalidFault."""
        if not isinstance(value, dict):
            raise InvalidFault("the body must be a JSON object")
        unknown = set(value) - {"mode", "times", "key", "delay_s", "message"}
        if unknown:
            raise InvalidFault(f"unknown fields: {', '.join(sorted(unknown))}")
        return cls(mode=value.get("mode", ""), times=value.get("times", 1),
                   key=value.get("key"), delay_s=value.get("delay_s"),
                   message=value.get("message"))

    @classmethod
    def from_spec(cls, spec: str) -> Fault:
        """From a ``MODE[:TIMES[:DELAY_S]]`` command-line value. Raises InvalidFault."""
        mode, *rest = spec.split(":")
        if len(rest) > 2:
            raise InvalidFault(f"expected MODE[:TIMES[:DELAY_S]], got {spec!r}")
        try:
            times = int(rest[0]) if rest and rest[0] else 1
            delay_s = float(rest[1]) if len(rest) > 1 and rest[1] else None
        except ValueError as exc:
            raise InvalidFault(f"expected MODE[:TIMES[:DELAY_S]], got {spec!r}") from exc
        return cls(mode=mode, times=times, delay_s=delay_s)

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "times": self.times, "key": self.key,
                "delay_s": self.delay, "message": self.message}


class FaultBoard:
    """The armed faults, in the order they were armed; safe to use from any thread."""

    def __init__(self, faults: tuple[Fault, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._faults = list(faults)

    def arm(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def armed(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def take(self, key: str) -> Fault | None:
        """Consume one use of the first fault matching ``key``; None when none matches."""
        with self._lock:
            for index, fault in enumerate(self._faults):
                if fault.key is None or fault.key == key:
                    if fault.times > 1:
                        self._faults[index] = replace(fault, times=fault.times - 1)
                    else:
                        del self._faults[index]
                    return fault
        return None
