"""Deadlines: what happens to a key when time passes with no event for it.

Time is the partition clock the runtime passes in (broker timestamps, monotone per
partition; quiet partitions get Tick records), so a deadline fires at the same point of the
log on every replay. The runtime keeps an index of ``due_ms`` per key and decides a
``Timer`` for each key whose deadline the clock has passed.

Three deadlines wait for an answer to the ledger's own output: a claim after a Dispatch
(RESERVED), the holder's outcome after a Grant (DISPATCHED), a result after a Reconcile
(RECONCILING). The answer can only be appended after the output left the processor, and a
processor catching up a backlog decides at a partition clock far behind the time its outputs
leave: counted from the partition clock alone, such a deadline expired while its answer was
still to be written (a key went to an operator, ``reconciliation_required``, with nothing
unknown). So each of them counts from no earlier than ``sent_at_ms``, the time the output it
waits on left (the runtime's wall clock, given to ``decide`` as data and kept in the state:
a replay or a restore reads the same deadline back).

A pre-grant (``KeyState.pregrant_until_ms``) is not re-read by anyone once its record was
fenced: the connector that fenced it commits past the record, so the partition's next owner
starts after it. If that connector dies, only the processor's timers move the key, and they
act at the pre-grant's end plus the skew margin, not ``stall_after`` later: a RESERVED key
no fenced claim reached gets a plain copy of its Dispatch (``PREGRANT``), and a key granted
to its fencer is reconciled (``FENCED``). Neither grants anything: a timer is liveness only.
"""

from __future__ import annotations

from typing import Protocol

from ledger_stream.domain.events import AlertKind
from ledger_stream.domain.outputs import alert_for, dispatch_for
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import AttemptRecord, KeyState, Phase
from ledger_stream.domain.transitions import Decision, reconcile, to_operator

TIMER_CLAIM = "timer"  # the claim id a deadline's Reconcile names (it answers no claim)


class Deadlined(Protocol):
    """What a key's deadline depends on: a KeyState, or a stored row read without building
    one (``state.rows.RowDeadline``, restore's hot path)."""

    @property
    def phase(self) -> Phase: ...
    @property
    def attempt(self) -> int: ...
    @property
    def stall_alerted(self) -> int: ...
    @property
    def not_before_ms(self) -> int: ...
    @property
    def phase_since_ms(self) -> int: ...
    @property
    def lease_until_ms(self) -> int: ...
    @property
    def terminal_at_ms(self) -> int: ...
    @property
    def sent_at_ms(self) -> int: ...
    @property
    def pregrant_until_ms(self) -> int: ...
    @property
    def action(self) -> str: ...


# What a deadline counts from, apart from the policy: ``due = base + allowance(kind)``. The
# changelog carries each row's basis beside it, so restore rebuilds the timer index without
# decoding rows, and under the policy it runs with (the allowances are the policy's).
# PREGRANT: a RESERVED key's pre-grant, FENCED: the lease of a holder granted under one.
STALL, LEASE, RECONCILE, SEAL, PREGRANT, FENCED = "s", "l", "r", "w", "p", "f"
KINDS = (STALL, LEASE, RECONCILE, SEAL, PREGRANT, FENCED)
DeadlineBasis = tuple[str, int]  # (kind, base_ms)


def deadline_basis(state: Deadlined) -> DeadlineBasis | None:
    """The kind of the key's next deadline and the time it counts from, or None.

    RESERVED: a dispatch nobody claimed raises ``stalled`` once per attempt; while a
    pre-grant is on record, its end instead (plus the skew margin, ``PREGRANT``): no fenced
    claim reached the key by then, and nobody but the processor will offer it again.
    DISPATCHED: the holder said nothing long after its lease: reconcile; a holder granted
    under the pre-grant (its fencer, ``pregrant_until_ms`` kept) right after its lease
    (``FENCED``): nobody re-reads its record to claim it. RECONCILING: no result came: an
    operator decides. SUCCEEDED / FAILED: the replay window ends: seal. The in-flight ones
    count from no earlier than the time their Dispatch, Grant or Reconcile left the
    processor (``sent_at_ms``): never before their answer could have been written.
    """
    phase = state.phase
    if phase is Phase.RESERVED:
        if state.pregrant_until_ms > 0:
            return PREGRANT, max(state.pregrant_until_ms, state.sent_at_ms)
        if state.stall_alerted == state.attempt:
            return None
        return STALL, max(state.not_before_ms, state.phase_since_ms, state.sent_at_ms)
    if phase is Phase.DISPATCHED:
        if state.pregrant_until_ms > 0:
            return FENCED, max(state.lease_until_ms, state.sent_at_ms)
        return LEASE, max(state.lease_until_ms, state.sent_at_ms)
    if phase is Phase.RECONCILING:
        return RECONCILE, max(state.phase_since_ms, state.sent_at_ms)
    if phase.terminal:
        return SEAL, state.terminal_at_ms
    return None


def allowance(kind: str, policy: Policy) -> int:
    """How long after its base a deadline of ``kind`` falls, under ``policy`` (a seal: the
    ledger-wide window; ``due_ms`` takes an action's own, shorter one)."""
    if kind == STALL:
        return policy.stall_after_ms
    if kind == LEASE:
        return policy.clock_skew_ms + policy.stall_after_ms
    if kind == RECONCILE:
        return policy.reconcile_timeout_ms
    if kind == SEAL:
        return policy.replay_window_ms + 1
    if kind in (PREGRANT, FENCED):
        return policy.clock_skew_ms
    raise ValueError(f"no deadline kind {kind!r}")


def allowances(policy: Policy) -> dict[str, int]:
    """Every kind's allowance under ``policy`` (restore looks them up per record)."""
    return {kind: allowance(kind, policy) for kind in KINDS}


def due_ms(state: Deadlined, policy: Policy) -> int | None:
    """When the key's next deadline falls (a Timer at or after it acts), or None."""
    basis = deadline_basis(state)
    if basis is None:
        return None
    if basis[0] == SEAL:  # the action's own replay window, when it has one
        return basis[1] + policy.replay_window_for(state.action) + 1
    return basis[1] + allowance(basis[0], policy)


def deadline(state: KeyState, policy: Policy, now: int) -> Decision:
    """A Timer: act on the key's deadline if it has come (a stale timer changes nothing)."""
    due = due_ms(state, policy)
    if due is None or now < due:
        return Decision(state)
    source = f"timer/{state.attempt}/{due}"
    if state.phase is Phase.RESERVED and state.pregrant_until_ms > 0:
        # The pre-grant ran out (skew margin included) with no fenced claim read: nobody
        # else reads its record, so a plain copy (same id), which the partition's next
        # connector claims and is granted, the pre-grant being over; no alert (a
        # rebalance's backlog ends here too): the stall timer then counts from the copy.
        # Its end stays, as a lease: the partition clock may have passed it on the intents
        # topic, and a fenced claim appended before it, read now, is still its fencer's
        # (decide._claim); the copy's claims come after that one in the attempts log.
        ended = state.changed(pregrant_until_ms=0, lease_until_ms=state.pregrant_until_ms)
        return Decision(ended, (dispatch_for(ended, now),))
    if state.phase is Phase.RESERVED:
        # Nobody claimed the dispatch: say so, and offer the same dispatch again (its id is
        # unchanged, so a connector that handled it skips it).
        stalled = state.changed(stall_alerted=state.attempt)
        alert = alert_for(state.key, AlertKind.STALLED, source,
                       f"attempt {state.attempt} for target {state.target!r} not claimed "
                       f"within {policy.stall_after_ms} ms", now)
        return Decision(stalled, (dispatch_for(state, now), alert))
    if state.phase is Phase.DISPATCHED:
        why = ("the fenced holder reported nothing by its lease's end"
               if state.pregrant_until_ms > 0
               else "the holder reported nothing long after its lease")
        return reconcile(state, now, TIMER_CLAIM,
                          AttemptRecord(state.attempt, TIMER_CLAIM, "lease_expired", now), why)
    # RECONCILING (terminal keys were sealed by expire_if_due before getting here).
    return to_operator(state, now, f"no reconcile result within "
                        f"{policy.reconcile_timeout_ms} ms", source)
