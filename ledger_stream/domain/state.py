"""The authoritative per-key record the processor keeps in its state store."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from ledger_stream.domain.values import replace

ATTEMPT_HISTORY_LIMIT = 8


class Phase(StrEnum):
    ABSENT = "absent"
    RESERVED = "reserved"  # attempt n dispatched, not granted yet
    DISPATCHED = "dispatched"  # attempt n granted to one claim
    RECONCILING = "reconciling"  # outcome of attempt n unknown, target being queried
    NEEDS_OPERATOR = "needs_operator"
    HELD = "held"  # attempt n ready, its dispatch held by a freeze (containment)
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"  # sealed: terminal for longer than the replay window

    @property
    def live(self) -> bool:
        return self not in (Phase.ABSENT, Phase.EXPIRED)

    @property
    def terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)

    @property
    def in_flight(self) -> bool:
        return self in (
            Phase.RESERVED, Phase.DISPATCHED, Phase.RECONCILING, Phase.NEEDS_OPERATOR,
            Phase.HELD,
        )


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One report about one attempt, kept for the key's timeline."""

    attempt: int
    claim_id: str
    what: str  # "granted", an OutcomeStatus value, or "reconcile:<status>"
    at_ms: int
    external_id: str = ""


@dataclass(frozen=True, slots=True)
class KeyState:
    """Everything the ledger knows about one operation key.

    Once sealed (EXPIRED) only the key, args hash, external id and terminal time remain:
    the material arguments and payload are redacted.
    """

    key: str
    phase: Phase = Phase.ABSENT
    intent_event_id: str = ""
    tenant: str = ""
    action: str = ""
    target: str = ""
    args_hash: str = ""
    args_json: str = ""
    payload_json: str = ""
    graph: str = ""
    version: str = ""
    attempt: int = 0
    granted_claim_id: str = ""
    lease_until_ms: int = 0
    not_before_ms: int = 0
    external_id: str = ""
    status_detail: str = ""
    reserved_at_ms: int = 0
    terminal_at_ms: int = 0
    duplicate_effects: int = 0
    history: tuple[AttemptRecord, ...] = field(default_factory=tuple)
    phase_since_ms: int = 0  # when the key entered its phase (stall and reconcile timers)
    unknown_attempts: int = 0  # attempts whose outcome nobody could establish
    lapses: int = 0  # attempts whose holder never called (late grant, withdrawn claim)
    settled_by: str = ""  # the claim (or "operator:<name>") whose report settled the key
    stall_alerted: int = 0  # the attempt a ``stalled`` alert was last raised for
    sealed_outcome: str = ""  # SUCCEEDED or FAILED, kept when the key is sealed
    held_by: str = ""  # HELD: the scope of the freeze holding the key's dispatch
    # When the output the key now waits on (its Dispatch, Grant or Reconcile) left the
    # processor, by the processor's own clock (0: not known). Deadlines that wait for an
    # answer to it count from no earlier than this (deadlines.py), so a lagging processor's
    # partition clock cannot expire them before the answer could be in the log.
    sent_at_ms: int = 0

    @property
    def counted_attempts(self) -> int:
        """Attempts that count against ``max_attempts``: lapses never called the target."""
        return self.attempt - self.lapses

    def with_record(self, record: AttemptRecord, **changes: Any) -> KeyState:
        history = (*self.history, record)[-ATTEMPT_HISTORY_LIMIT:]
        return replace(self, history=history, **changes)

    def sealed(self) -> KeyState:
        """The redacted marker kept after the replay window: enough to answer a late intent
        with the key's outcome, nothing of its arguments or payload."""
        return KeyState(
            key=self.key,
            phase=Phase.EXPIRED,
            intent_event_id=self.intent_event_id,
            args_hash=self.args_hash,
            external_id=self.external_id,
            attempt=self.attempt,
            terminal_at_ms=self.terminal_at_ms,
            granted_claim_id=self.granted_claim_id,
            settled_by=self.settled_by,
            sealed_outcome=self.phase.value,
        )

    # -- state store encoding -----------------------------------------------------------
    # A JSON array of the field values in declaration order: about half the bytes and time
    # of a dict with names. Fields are only ever appended, so an older, shorter row reads
    # back with the newer fields at their defaults.

    def to_row(self) -> list[Any]:
        row = [getattr(self, name) for name in _FIELDS]
        row[_PHASE] = self.phase.value
        row[_HISTORY] = [[r.attempt, r.claim_id, r.what, r.at_ms, r.external_id]
                         for r in self.history]
        return row

    @classmethod
    def from_row(cls, row: list[Any]) -> KeyState:
        values = dict(zip(_FIELDS, row, strict=False))
        values["phase"] = Phase(values["phase"])
        values["history"] = tuple(AttemptRecord(*r) for r in values.get("history", ()))
        return cls(**values)


_FIELDS = tuple(f.name for f in fields(KeyState))
FIELD_INDEX = {name: i for i, name in enumerate(_FIELDS)}  # a row's position of each field
_PHASE = _FIELDS.index("phase")
_HISTORY = _FIELDS.index("history")


def absent(key: str) -> KeyState:
    return KeyState(key=key)
