"""Containment: an operator freezes an action, for one tenant or for every tenant.

While a freeze in ``hold`` mode covers a key's (tenant, action), no new dispatch leaves the
ledger for it: a new intent is recorded and answered ``held: frozen``, and a retry, a
redispatch after a reconciliation or an operator's "not applied" waits the same way. The
key is HELD: its attempt is ready, its Dispatch withheld. The unfreeze releases the held
keys of each partition in the order they were held. A freeze in ``approval`` mode instead
makes every new intent of the action need a valid approval.

A Dispatch that left before the freeze and was not granted yet is held at its claim: the
claimant gets Held (claim again later) and the key waits like the others. A grant given
before the freeze is not recalled, and a fast-path connector (a target that deduplicates)
calls without waiting for its grant, and neither does the connector holding a pre-grant
(a fenced claim appended within it is granted under a freeze too): those calls can still
happen. A key held while its pre-grant runs keeps it, and one held after its end keeps the
end as a lease, for a fenced claim appended before it and read late (:func:`withhold`).

A freeze may instead be scoped by workflow version (graph id and version, action and
tenant empty; scope ``@version/<graph>/<version>``): it holds the NEW intents whose workflow
is that version (recorded, answered ``held: frozen``, not dispatched), while intents of other
versions pass and keys already in flight under it finish (retried, reconciled, dispatched as
usual). So an operator can drain a version before a deploy. Its unfreeze releases the keys it
held like any other.

Each freeze or unfreeze takes effect once: a record repeating a command the partition has
applied already (the same event id, scope, freeze or unfreeze and mode: an operator's command
run again with its ``--event-id`` after a timeout) changes nothing. Without this, an unfreeze
retried after someone froze the scope again lifted the new freeze. The partition remembers
the last APPLIED_LIMIT commands, as digests (:func:`command_digest`): a bounded row whatever
the ids' length, and an id reused for another command (another tenant's, through the
gateway) never suppresses it.

Pure values. Each partition keeps its :class:`Containment` with its state (one row), so
freezes survive restarts and a replay decides under the same freezes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from ledger_stream.domain.events import (
    Containment as ContainmentEvent,
)
from ledger_stream.domain.events import (
    Dispatch,
    FreezeMode,
    Grant,
    Held,
    Reason,
    Receipt,
    ReceiptStatus,
    Release,
)
from ledger_stream.domain.outputs import dispatch_for, receipt_for, state_receipt
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.domain.transitions import Decision, enter, to_operator
from ledger_stream.domain.values import replace

# The held queue of one partition, as stored: it lives in one row of the state store and
# one changelog record, which must fit in a Kafka record (1 MiB by default). Past it a new
# intent is rejected (reason ``frozen``, nothing recorded) and a key in flight goes to an
# operator: nothing is dropped in silence.
HELD_LIMIT_BYTES = 256 * 1024
# What one freeze may hold in text, and how many freezes a partition keeps: a Containment
# record past these is poison (read in the processor's step), so the row stays bounded.
TEXT_LIMIT = 500
FREEZE_LIMIT = 64
# How many applied freeze and unfreeze commands a partition remembers, to ignore a repeat:
# operators' commands are rare, and a retry comes seconds after its first try, not after
# a thousand other commands (from every tenant). 1,024 digests of 16 characters (19 KiB
# in the stored row).
APPLIED_LIMIT = 1024
# A claim for a held attempt is answered Held until this much later: the claimant keeps the
# dispatch and claims again then (granted once the unfreeze has released the key).
CLAIM_AGAIN_MS = 5_000


def scope_of(tenant: str, action: str) -> str:
    """A freeze's scope: ``tenant/action``, ``*/action`` for every tenant."""
    return f"{tenant or '*'}/{action}"


VERSION_SCOPE_PREFIX = "@version/"  # "@" is no tenant's: a key part cannot hold it


def version_scope(graph: str, version: str) -> str:
    """A freeze's scope by workflow version: ``@version/<graph>/<version>``."""
    return f"{VERSION_SCOPE_PREFIX}{graph}/{version}"


def command_scope(event: ContainmentEvent) -> str:
    """The scope a freeze or unfreeze command names: its workflow version's, or else its
    (tenant, action)'s."""
    if event.version:
        return version_scope(event.graph, event.version)
    return scope_of(event.tenant, event.action)


AUDIT_KEY_PREFIX = "~freeze/"


def audit_key(scope: str) -> str:
    """The audit topic's key of a freeze or unfreeze of ``scope``."""
    return f"{AUDIT_KEY_PREFIX}{scope}"


def audit_keys_covering(key: str) -> tuple[str, str]:
    """The audit keys of the freezes that cover operation key ``key``: those of its
    tenant's scope and of every tenant's."""
    tenant, _, rest = key.partition("/")
    action = rest.split("/", 1)[0]
    return audit_key(scope_of(tenant, action)), audit_key(scope_of("", action))


@dataclass(frozen=True, slots=True)
class Freeze:
    tenant: str  # "" for every tenant
    action: str
    mode: FreezeMode
    reason: str
    operator: str
    event_id: str
    since_ms: int
    graph: str = ""  # with version: a freeze of that workflow version (action empty)
    version: str = ""

    @property
    def scope(self) -> str:
        if self.version:
            return version_scope(self.graph, self.version)
        return scope_of(self.tenant, self.action)

    def covers(self, tenant: str, action: str, workflow: tuple[str, str] | None = None
               ) -> bool:
        """Whether this freeze covers a decision for (tenant, action). A version freeze
        covers only a new intent of its version (``workflow``: the intent's (graph,
        version), given for a new intent only)."""
        if self.version:
            return workflow == (self.graph, self.version)
        return action == self.action and (not self.tenant or tenant == self.tenant)


@dataclass(frozen=True, slots=True)
class Hold:
    """The freezes covering one decision's key: the ``hold`` one (if any), whether an
    ``approval`` one covers it too, and whether its partition can hold one more key."""

    freeze: Freeze | None
    approval: bool = False
    room: bool = True


def entry_bytes(scope: str, key: str) -> int:
    """What one held entry adds to the stored row (UTF-8 JSON, its comma included)."""
    return len(json.dumps([scope, key], ensure_ascii=False).encode()) + 1


@dataclass(frozen=True, slots=True)
class Containment:
    """One partition's active freezes and the keys they hold, in the order held."""

    freezes: tuple[Freeze, ...] = ()
    held: tuple[tuple[str, str], ...] = ()  # (scope, key)
    held_bytes: int = 0  # the held entries' size in the stored row
    applied: tuple[str, ...] = ()  # the last APPLIED_LIMIT commands' digests, oldest first

    def repeats(self, event: ContainmentEvent, counts: bool = True) -> bool:
        """Whether ``event``'s command was applied here already (a retry): it changes
        nothing then. An event without an id, or from a record that does not count
        (:func:`counted`), is never a repeat."""
        return counts and bool(event.event_id) and command_digest(event) in self.applied

    def refusal(self, event: ContainmentEvent) -> str:
        """Why a processor refuses ``event`` (as poison), or "": a freeze of a new scope
        past the FREEZE_LIMIT scopes it keeps."""
        scope = command_scope(event)
        if event.frozen and len(self.freezes) >= FREEZE_LIMIT \
                and all(f.scope != scope for f in self.freezes):
            return f"a Containment past {FREEZE_LIMIT} frozen scopes"
        return ""

    def hold_for(self, tenant: str, action: str, key: str = "", held_by: str = "",
                 workflow: tuple[str, str] | None = None) -> Hold | None:
        """The freezes covering (tenant, action), or None. ``held_by``: the scope that
        holds ``key`` now (its entry would be replaced, not added; that freeze keeps
        covering it). ``workflow``: a new intent's (graph, version), for the freezes by
        workflow version (None for anything else: a key in flight finishes)."""
        found = [f for f in self.freezes
                 if f.covers(tenant, action, workflow) or (held_by and f.scope == held_by)]
        if not found:
            return None
        holding = next((f for f in found if f.mode is FreezeMode.HOLD), None)
        now_held = entry_bytes(held_by, key) if held_by else 0
        room = holding is None or \
            self.held_bytes - now_held + entry_bytes(holding.scope, key) <= HELD_LIMIT_BYTES
        return Hold(holding, any(f.mode is FreezeMode.APPROVAL for f in found), room)

    def apply(self, event: ContainmentEvent, now_ms: int, counts: bool = True
              ) -> tuple[Containment, list[str]]:
        """The containment after ``event``, and the keys an unfreeze releases, in the order
        held (their entries stay until each is decided: see :meth:`moved`). Freezing a
        frozen scope again changes its mode and reason (it releases nothing); unfreezing a
        scope that is not frozen changes nothing; a repeat (:meth:`repeats`) changes
        nothing. ``counts``: the record counts for repeats (:func:`counted`)."""
        if self.repeats(event, counts):
            return self, []
        scope = command_scope(event)
        others = tuple(f for f in self.freezes if f.scope != scope)
        applied = remember(self.applied, event) if counts else self.applied
        if event.frozen:
            previous = next((f for f in self.freezes if f.scope == scope), None)
            since = previous.since_ms if previous else now_ms
            freeze = Freeze(event.tenant, event.action, event.mode, event.reason,
                            event.operator, event.event_id, since, event.graph,
                            event.version)
            return replace(self, freezes=(*others, freeze), applied=applied), []
        return (replace(self, freezes=others, applied=applied),
                [key for s, key in self.held if s == scope])

    def moved(self, key: str, before: str, after: str) -> Containment:
        """Key ``key`` went from held by scope ``before`` (empty: not held) to held by
        ``after`` (empty: not held any more). A key held again by another freeze keeps its
        place in the order."""
        if before:
            at = next((i for i, e in enumerate(self.held) if e == (before, key)), None)
            if at is not None:
                size = self.held_bytes - entry_bytes(before, key)
                if after:
                    held = (*self.held[:at], (after, key), *self.held[at + 1:])
                    return replace(self, held=held, held_bytes=size + entry_bytes(after, key))
                return replace(self, held=self.held[:at] + self.held[at + 1:],
                               held_bytes=size)
        if after:
            return replace(self, held=(*self.held, (after, key)),
                           held_bytes=self.held_bytes + entry_bytes(after, key))
        return self

    def without_scope(self, scope: str) -> Containment:
        """Every entry of ``scope`` dropped (after an unfreeze has decided its keys)."""
        kept = tuple(e for e in self.held if e[0] != scope)
        if len(kept) == len(self.held):
            return self
        return replace(self, held=kept, held_bytes=sum(entry_bytes(*e) for e in kept))

    # -- the stored row -------------------------------------------------------------------

    def to_row(self) -> dict[str, Any]:
        # A version freeze's row has two more items (graph, version); an action's keeps the
        # seven older processors read.
        return {
            "freezes": [[f.tenant, f.action, f.mode.value, f.reason, f.operator, f.event_id,
                         f.since_ms, *([f.graph, f.version] if f.version else [])]
                        for f in self.freezes],
            "held": [list(entry) for entry in self.held],
            "applied": list(self.applied),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Containment:
        freezes = tuple(Freeze(t, a, FreezeMode(m), r, o, e, s, *rest)
                        for t, a, m, r, o, e, s, *rest in row.get("freezes", ()))
        held = tuple((s, k) for s, k in row.get("held", ()))
        applied = tuple(row.get("applied", ()))  # absent in rows written before 2026-12-05
        return cls(freezes, held, sum(entry_bytes(*e) for e in held), applied)


# A command's records are keyed ``~containment/<event id>/<send id>`` (32 hex digits, one
# per send). Records keyed without the send id were written before commands applied once
# (2026-12-05) and are never taken for repeats: the processors of the time applied them all.
COMMAND_KEY_PREFIX = "~containment/"
_SEND_ID = re.compile(rb"/[0-9a-f]{32}\Z")


def command_key(event_id: str, send_id: str) -> bytes:
    return f"{COMMAND_KEY_PREFIX}{event_id}/{send_id}".encode()


def counted(key: bytes | None) -> bool:
    """Whether a command record with this key counts for repeats (see COMMAND_KEY_PREFIX)."""
    return key is not None and key.startswith(COMMAND_KEY_PREFIX.encode()) \
        and _SEND_ID.search(key) is not None


def command_digest(event: ContainmentEvent) -> str:
    """What identifies a freeze or unfreeze command across its retries: its event id and
    what it does (not its partition, time, reason or operator)."""
    parts: list[object] = [event.event_id, event.tenant, event.action, event.frozen,
                           event.mode.value]
    if event.version:  # an action's command keeps the digest older processors stored
        parts += [event.graph, event.version]
    text = json.dumps(parts)  # unambiguous whatever the id holds
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def remember(applied: tuple[str, ...], event: ContainmentEvent) -> tuple[str, ...]:
    """``applied`` with ``event``'s command added, keeping the last APPLIED_LIMIT."""
    if not event.event_id:
        return applied
    return (*applied, command_digest(event))[-APPLIED_LIMIT:]


NONE = Containment()


def withhold(before: KeyState, decision: Decision, hold: Hold, now: int) -> Decision:
    """``decision`` under a freeze: a decision that would dispatch holds the key instead
    (HELD, its state receipt ``held: frozen``, no Dispatch), and so does the first grant of
    a dispatch that left before the freeze (its claimant gets Held). With no room left to
    hold it, a new intent is rejected, a key in flight goes to an operator, and a claimant
    gets Held with the key left as it was (it is offered again after the unfreeze)."""
    freeze = hold.freeze
    if freeze is None:
        return decision
    grant = next((o for o in decision.outputs if isinstance(o, Grant)), None)
    # A grant under the pre-grant (to its fencer, whose claim was appended before its end:
    # decide._claim; the key keeps the end) is given: its connector calls without waiting
    # for the answer, under a grant given before the freeze (not recalled).
    if grant is not None and before.phase is Phase.RESERVED \
            and not decision.state.pregrant_until_ms:
        answer = claim_again(before, grant.attempt, grant.claim_id, now)
        if not hold.room:  # not held (no room to queue it): the claimant still waits
            return Decision(before, (answer,))
        held = _held(before, before, freeze, now)
        return Decision(held, (answer, state_receipt(held, now, Reason.FROZEN)))
    if not any(isinstance(o, Dispatch) for o in decision.outputs):
        return decision
    state = decision.state
    # The state receipt of the dispatch is replaced by the hold's; an operator's receipt
    # stays (it names the decision that took effect, for its sender).
    kept = tuple(o for o in decision.outputs if not isinstance(o, Dispatch) and not (
        isinstance(o, Receipt) and o.intent_event_id == state.intent_event_id
        and o.reason is not Reason.OPERATOR))
    if not hold.room:
        full = f"{_why(freeze)}; the partition's hold queue is full"
        if before.phase is Phase.ABSENT:
            receipt = receipt_for(before, state.intent_event_id, now,
                                  status=ReceiptStatus.REJECTED, reason=Reason.FROZEN,
                                  args_hash=state.args_hash, detail=full)
            return Decision(before, (*kept, receipt))
        waiting = to_operator(state, now, full, f"freeze/{freeze.scope}/{state.attempt}")
        return Decision(waiting.state, kept + waiting.outputs)
    held = _held(before, state, freeze, now)
    return Decision(held, (*kept, state_receipt(held, now, Reason.FROZEN)))


def _held(before: KeyState, state: KeyState, freeze: Freeze, now: int) -> KeyState:
    """``state`` held by ``freeze``, keeping the pre-grant of ``before`` (RESERVED or HELD:
    it left before the freeze; its fencer calls without waiting for an answer). Running (an
    unfreeze's Dispatch releasing the key into another freeze's hold, or a stall timer's
    copy from a release whose timers acted inside a pre-grant), it is kept as such: the
    fencer's claim is granted and the plain Dispatch waits for its end (dropped, a second
    connector could be granted the attempt). Ended, its end is kept as a lease
    (``decide.pregrant_end``): a fenced claim appended before it, read after the partition
    clock passed it, is still its fencer's."""
    held = enter(state.changed(held_by=freeze.scope, status_detail=_why(freeze)),
                 Phase.HELD, now)
    if before.phase is not Phase.RESERVED and before.phase is not Phase.HELD:
        return held  # a new intent or a later attempt: no pre-grant of theirs left
    if now < before.pregrant_until_ms:
        return held.changed(pregrant_until_ms=before.pregrant_until_ms)
    if before.pregrant_until_ms > held.lease_until_ms:
        return held.changed(lease_until_ms=before.pregrant_until_ms)
    return held


def claim_again(state: KeyState, attempt: int, claim_id: str, now: int) -> Held:
    """The answer to a claim for a held attempt: keep the dispatch, claim again later."""
    return Held(state.key, attempt, claim_id, now + CLAIM_AGAIN_MS, now)


def _why(freeze: Freeze) -> str:
    return f"frozen: {freeze.reason}" if freeze.reason else "frozen"


def release(state: KeyState, event: Release, now: int) -> Decision:
    """An unfreeze reached a key its freeze holds: dispatch the withheld attempt."""
    if state.phase is not Phase.HELD or state.held_by != event.scope:
        return Decision(state)
    ready = enter(state.changed(held_by="", stall_alerted=0,
                                status_detail=f"released by the unfreeze of {event.scope}"),
                  Phase.RESERVED, now)
    return Decision(ready, (state_receipt(ready, now), dispatch_for(ready, now)))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a partition does with one freeze or unfreeze command: ``repeat`` (applied here
    already: nothing changes), ``refused`` (poison: nothing changes), or else the
    containment after it and the keys an unfreeze releases, in the order held."""

    containment: Containment
    released: tuple[str, ...] = ()
    repeat: bool = False
    refused: str = ""


def take(current: Containment, event: ContainmentEvent, now_ms: int, counts: bool = True
         ) -> Outcome:
    """The processors' rule for a command that passed :func:`refused_on_read`: a repeat
    changes nothing, a freeze past FREEZE_LIMIT scopes is refused, anything else applies
    (:meth:`Containment.apply`). The processor's step and the operator's ``freezes`` both
    decide with it, so what an operator is shown in force is what the processors hold."""
    if current.repeats(event, counts):
        return Outcome(current, repeat=True)
    refused = current.refusal(event)
    if refused:
        return Outcome(current, refused=refused)
    after, released = current.apply(event, now_ms, counts)
    return Outcome(after, tuple(released))


def refused_on_read(event: ContainmentEvent, key: bytes | None, partition: int) -> str:
    """Why a processor refuses a command record read from ``partition`` under ``key`` as
    poison before deciding it, or "": a key that is not UTF-8, another partition's copy, an
    invalid command (:func:`invalid_containment`), a key outside COMMAND_KEY_PREFIX (the
    operator's ``freezes`` would not see it)."""
    try:
        (key or b"").decode("utf-8")
    except UnicodeDecodeError:
        return "message key is not UTF-8"
    if event.partition != partition:
        return f"Containment for partition {event.partition} read from {partition}"
    why = invalid_containment(event)
    if why:
        return f"invalid Containment: {why}"
    if not (key or b"").startswith(COMMAND_KEY_PREFIX.encode()):
        return f"Containment keyed outside {COMMAND_KEY_PREFIX}"
    return ""


def invalid_containment(event: ContainmentEvent) -> str:
    """Why the processor refuses ``event`` (a Containment) as poison, or "": the operator's
    command runs the same check before sending, so a freeze no processor would hold is
    never reported sent (a long --operator was, and `freezes` listed it in force)."""
    if event.version or event.graph:
        if not (event.graph and event.version) or event.action or event.tenant:
            return "a version freeze names a graph and a version, no action or tenant"
        if "/" in event.graph:  # its scope would read as another (graph, version)'s
            return "a version freeze's graph cannot hold '/'"
    elif not event.action or "/" in event.action + event.tenant or event.tenant == "*":
        return "action and tenant must be key parts"
    for name in ("action", "tenant", "reason", "operator", "event_id", "graph", "version"):
        if len(getattr(event, name)) > TEXT_LIMIT:
            return f"{name} longer than {TEXT_LIMIT} characters"
    return ""
