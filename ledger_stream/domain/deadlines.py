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
    def action(self) -> str: ...


# What a deadline counts from, apart from the policy: ``due = base + allowance(kind)``. The
# changelog carries each row's basis beside it, so restore rebuilds the timer index without
# decoding rows, and under the policy it runs with (the allowances are the policy's).
STALL, LEASE, RECONCILE, SEAL = "s", "l", "r", "w"
KINDS = (STALL, LEASE, RECONCILE, SEAL)
DeadlineBasis = tuple[str, int]  # (kind, base_ms)


def deadline_basis(state: Deadlined) -> DeadlineBasis | None:
    """The kind of the key's next deadline and the time it counts from, or None.

    RESERVED: a dispatch nobody claimed raises ``stalled`` once per attempt. DISPATCHED:
    the holder said nothing long after its lease: reconcile. RECONCILING: no result came:
    an operator decides. SUCCEEDED / FAILED: the replay window ends: seal. The first three
    count from no earlier than the time their Dispatch, Grant or Reconcile left the
    processor (``sent_at_ms``): never before their answer could have been written.
    """
    phase = state.phase
    if phase is Phase.RESERVED:
        if state.stall_alerted == state.attempt:
            return None
        return STALL, max(state.not_before_ms, state.phase_since_ms, state.sent_at_ms)
    if phase is Phase.DISPATCHED:
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
    if state.phase is Phase.RESERVED:
        # Nobody claimed the dispatch: say so, and offer the same dispatch again (its id is
        # unchanged, so a connector that handled it skips it).
        stalled = state.changed(stall_alerted=state.attempt)
        alert = alert_for(state.key, AlertKind.STALLED, source,
                       f"attempt {state.attempt} for target {state.target!r} not claimed "
                       f"within {policy.stall_after_ms} ms", now)
        return Decision(stalled, (dispatch_for(state, now), alert))
    if state.phase is Phase.DISPATCHED:
        return reconcile(state, now, TIMER_CLAIM,
                          AttemptRecord(state.attempt, TIMER_CLAIM, "lease_expired", now),
                          "the holder reported nothing long after its lease")
    # RECONCILING (terminal keys were sealed by expire_if_due before getting here).
    return to_operator(state, now, f"no reconcile result within "
                        f"{policy.reconcile_timeout_ms} ms", source)
