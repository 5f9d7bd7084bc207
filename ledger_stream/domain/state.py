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
    # RESERVED on attempt 1: the end of the pre-grant its Dispatch carried (0: none). A
    # fenced claim appended before it is granted under it; a plain claim waits for it; the
    # deadline falls at it (deadlines.py: cleared then, the end kept as ``lease_until_ms``
    # for a fenced claim read late, ``decide.pregrant_end``). Kept when a freeze holds the
    # key while it runs (HELD: containment.withhold), and when its fencer is granted
    # (DISPATCHED: the holder's lease, ending then, is the pre-grant's); cleared when the
    # key leaves those otherwise (``enter``) or moves to another attempt.
    pregrant_until_ms: int = 0

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
                 sent_at_ms: int = 0, pregrant_until_ms: int = 0) -> None:
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
        object.__setattr__(self, "pregrant_until_ms", pregrant_until_ms)

    @property
    def counted_attempts(self) -> int:
        """Attempts that count against ``max_attempts``: lapses never called the target."""
        return self.attempt - self.lapses

    def with_record(self, record: AttemptRecord, **changes: Any) -> KeyState:
        history = (*self.history, record)[-ATTEMPT_HISTORY_LIMIT:]
        if changes:
            return self.changed(history=history, **changes)
        return self.changed(history=history)  # a native call in the compiled core

    def changed(self, *, key: str | None = None, phase: Phase | None = None,
                intent_event_id: str | None = None, tenant: str | None = None,
                action: str | None = None, target: str | None = None, args_hash: str | None = None,
                args_json: str | None = None, payload_json: str | None = None,
                graph: str | None = None, version: str | None = None, attempt: int | None = None,
                granted_claim_id: str | None = None, lease_until_ms: int | None = None,
                not_before_ms: int | None = None, external_id: str | None = None,
                status_detail: str | None = None, reserved_at_ms: int | None = None,
                terminal_at_ms: int | None = None, duplicate_effects: int | None = None,
                history: tuple[AttemptRecord, ...] | None = None, phase_since_ms: int | None = None,
                unknown_attempts: int | None = None, lapses: int | None = None,
                settled_by: str | None = None, stall_alerted: int | None = None,
                sealed_outcome: str | None = None, held_by: str | None = None,
                sent_at_ms: int | None = None,
                pregrant_until_ms: int | None = None) -> KeyState:
        """A copy with the fields given (not None: no field of a state holds None) changed,
        as ``dataclasses.replace`` makes it; a name that is not a field raises TypeError.
        Every decision changes a key's state once or twice: with each field a parameter of
        its own, the compiled core passes them in a native call and builds the copy in
        another (tests/domain/test_written_out.py checks that it names every field)."""
        return KeyState(
            key=self.key if key is None else key,
            phase=self.phase if phase is None else phase,
            intent_event_id=self.intent_event_id if intent_event_id is None else intent_event_id,
            tenant=self.tenant if tenant is None else tenant,
            action=self.action if action is None else action,
            target=self.target if target is None else target,
            args_hash=self.args_hash if args_hash is None else args_hash,
            args_json=self.args_json if args_json is None else args_json,
            payload_json=self.payload_json if payload_json is None else payload_json,
            graph=self.graph if graph is None else graph,
            version=self.version if version is None else version,
            attempt=self.attempt if attempt is None else attempt,
            granted_claim_id=(self.granted_claim_id if granted_claim_id is None
                                 else granted_claim_id),
            lease_until_ms=self.lease_until_ms if lease_until_ms is None else lease_until_ms,
            not_before_ms=self.not_before_ms if not_before_ms is None else not_before_ms,
            external_id=self.external_id if external_id is None else external_id,
            status_detail=self.status_detail if status_detail is None else status_detail,
            reserved_at_ms=self.reserved_at_ms if reserved_at_ms is None else reserved_at_ms,
            terminal_at_ms=self.terminal_at_ms if terminal_at_ms is None else terminal_at_ms,
            duplicate_effects=(self.duplicate_effects if duplicate_effects is None
                                  else duplicate_effects),
            history=self.history if history is None else history,
            phase_since_ms=self.phase_since_ms if phase_since_ms is None else phase_since_ms,
            unknown_attempts=(self.unknown_attempts if unknown_attempts is None
                                 else unknown_attempts),
            lapses=self.lapses if lapses is None else lapses,
            settled_by=self.settled_by if settled_by is None else settled_by,
            stall_alerted=self.stall_alerted if stall_alerted is None else stall_alerted,
            sealed_outcome=self.sealed_outcome if sealed_outcome is None else sealed_outcome,
            held_by=self.held_by if held_by is None else held_by,
            sent_at_ms=self.sent_at_ms if sent_at_ms is None else sent_at_ms,
            pregrant_until_ms=(self.pregrant_until_ms if pregrant_until_ms is None
                               else pregrant_until_ms),
        )

    def sealed(self) -> KeyState:
        """The redacted marker kept after the replay window: enough to answer a late intent
        with the key's outcome, nothing of its arguments or payload. The target stays: an
        effect a watcher finds at another target must not settle the sealed key either."""
        return KeyState(
            key=self.key,
            phase=Phase.EXPIRED,
            target=self.target,
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
                self.sealed_outcome, self.held_by, self.sent_at_ms, self.pregrant_until_ms]

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
FIELD_INDEX = {name: i for i, name in enumerate(_FIELDS)}  # a row's position of each field
_PHASE = _FIELDS.index("phase")
_HISTORY = _FIELDS.index("history")


def absent(key: str) -> KeyState:
    return KeyState(key=key)
