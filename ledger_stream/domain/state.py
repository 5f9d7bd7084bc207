"""The authoritative per-key record the processor keeps in its state store."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

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


@dataclass(frozen=True, slots=True, init=False)
class AttemptRecord:
    """One report about one attempt, kept for the key's timeline."""

    attempt: int
    claim_id: str
    what: str  # "granted", an OutcomeStatus value, or "reconcile:<status>"
    at_ms: int
    external_id: str = ""

    def __init__(self, attempt: int, claim_id: str, what: str, at_ms: int,
                 external_id: str = "") -> None:
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "what", what)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "external_id", external_id)


@dataclass(frozen=True, slots=True, init=False)
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

    # Written out for the compiled core, as in events.py (tests/domain/test_written_out.py).
    def __init__(self, key: str, phase: Phase = Phase.ABSENT, intent_event_id: str = "",
                 tenant: str = "", action: str = "", target: str = "", args_hash: str = "",
                 args_json: str = "", payload_json: str = "", graph: str = "", version: str = "",
                 attempt: int = 0, granted_claim_id: str = "", lease_until_ms: int = 0,
                 not_before_ms: int = 0, external_id: str = "", status_detail: str = "",
                 reserved_at_ms: int = 0, terminal_at_ms: int = 0, duplicate_effects: int = 0,
                 history: tuple[AttemptRecord, ...] = (), phase_since_ms: int = 0,
                 unknown_attempts: int = 0, lapses: int = 0, settled_by: str = "",
                 stall_alerted: int = 0, sealed_outcome: str = "", held_by: str = "",
                 sent_at_ms: int = 0) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "phase", phase)
        object.__setattr__(self, "intent_event_id", intent_event_id)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "args_hash", args_hash)
        object.__setattr__(self, "args_json", args_json)
        object.__setattr__(self, "payload_json", payload_json)
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "granted_claim_id", granted_claim_id)
        object.__setattr__(self, "lease_until_ms", lease_until_ms)
        object.__setattr__(self, "not_before_ms", not_before_ms)
        object.__setattr__(self, "external_id", external_id)
        object.__setattr__(self, "status_detail", status_detail)
        object.__setattr__(self, "reserved_at_ms", reserved_at_ms)
        object.__setattr__(self, "terminal_at_ms", terminal_at_ms)
        object.__setattr__(self, "duplicate_effects", duplicate_effects)
        object.__setattr__(self, "history", history)
        object.__setattr__(self, "phase_since_ms", phase_since_ms)
        object.__setattr__(self, "unknown_attempts", unknown_attempts)
        object.__setattr__(self, "lapses", lapses)
        object.__setattr__(self, "settled_by", settled_by)
        object.__setattr__(self, "stall_alerted", stall_alerted)
        object.__setattr__(self, "sealed_outcome", sealed_outcome)
        object.__setattr__(self, "held_by", held_by)
        object.__setattr__(self, "sent_at_ms", sent_at_ms)

    @property
    def counted_attempts(self) -> int:
        """Attempts that count against ``max_attempts``: lapses never called the target."""
        return self.attempt - self.lapses

    def with_record(self, record: AttemptRecord, **changes: Any) -> KeyState:
        history = (*self.history, record)[-ATTEMPT_HISTORY_LIMIT:]
        return self.changed(history=history, **changes)

    def changed(self, **changes: Any) -> KeyState:
        """A copy with ``changes`` applied, as ``dataclasses.replace`` makes it (a name that
        is not a field raises TypeError). Every decision changes a key's state once or twice:
        written out field by field, the compiled core builds the copy in one native call
        (tests/domain/test_values.py checks that it names every field)."""
        if not changes.keys() <= _FIELD_NAMES:
            unknown = ", ".join(sorted(changes.keys() - _FIELD_NAMES))
            raise TypeError(f"KeyState has no field {unknown}")
        return KeyState(
            key=changes.get("key", self.key),
            phase=changes.get("phase", self.phase),
            intent_event_id=changes.get("intent_event_id", self.intent_event_id),
            tenant=changes.get("tenant", self.tenant),
            action=changes.get("action", self.action),
            target=changes.get("target", self.target),
            args_hash=changes.get("args_hash", self.args_hash),
            args_json=changes.get("args_json", self.args_json),
            payload_json=changes.get("payload_json", self.payload_json),
            graph=changes.get("graph", self.graph),
            version=changes.get("version", self.version),
            attempt=changes.get("attempt", self.attempt),
            granted_claim_id=changes.get("granted_claim_id", self.granted_claim_id),
            lease_until_ms=changes.get("lease_until_ms", self.lease_until_ms),
            not_before_ms=changes.get("not_before_ms", self.not_before_ms),
            external_id=changes.get("external_id", self.external_id),
            status_detail=changes.get("status_detail", self.status_detail),
            reserved_at_ms=changes.get("reserved_at_ms", self.reserved_at_ms),
            terminal_at_ms=changes.get("terminal_at_ms", self.terminal_at_ms),
            duplicate_effects=changes.get("duplicate_effects", self.duplicate_effects),
            history=changes.get("history", self.history),
            phase_since_ms=changes.get("phase_since_ms", self.phase_since_ms),
            unknown_attempts=changes.get("unknown_attempts", self.unknown_attempts),
            lapses=changes.get("lapses", self.lapses),
            settled_by=changes.get("settled_by", self.settled_by),
            stall_alerted=changes.get("stall_alerted", self.stall_alerted),
            sealed_outcome=changes.get("sealed_outcome", self.sealed_outcome),
            held_by=changes.get("held_by", self.held_by),
            sent_at_ms=changes.get("sent_at_ms", self.sent_at_ms),
        )

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
        # Written out in field order, as __init__ is (tests/domain/test_written_out.py);
        # ``_value_``: the phase's string without the enum's ``value`` descriptor.
        history = [[r.attempt, r.claim_id, r.what, r.at_ms, r.external_id]
                   for r in self.history]
        return [self.key, self.phase._value_, self.intent_event_id, self.tenant, self.action,
                self.target, self.args_hash, self.args_json, self.payload_json, self.graph,
                self.version, self.attempt, self.granted_claim_id, self.lease_until_ms,
                self.not_before_ms, self.external_id, self.status_detail, self.reserved_at_ms,
                self.terminal_at_ms, self.duplicate_effects, history, self.phase_since_ms,
                self.unknown_attempts, self.lapses, self.settled_by, self.stall_alerted,
                self.sealed_outcome, self.held_by, self.sent_at_ms]

    @classmethod
    def from_row(cls, row: list[Any]) -> KeyState:
        # Positional: the row is in field order (a longer row, from a newer release, has
        # its extra fields dropped).
        values = row[:len(_FIELDS)]
        values[_PHASE] = Phase(values[_PHASE])
        if len(values) > _HISTORY:
            values[_HISTORY] = tuple(AttemptRecord(*r) for r in values[_HISTORY])
        return cls(*values)


_FIELDS = tuple(f.name for f in fields(KeyState))
_FIELD_NAMES = frozenset(_FIELDS)
FIELD_INDEX = {name: i for i, name in enumerate(_FIELDS)}  # a row's position of each field
_PHASE = _FIELDS.index("phase")
_HISTORY = _FIELDS.index("history")


def absent(key: str) -> KeyState:
    return KeyState(key=key)
