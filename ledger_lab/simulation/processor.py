"""The simulated processor: the real ``decide`` over one input partition, with the runtime's
partition clock, deadlines and crash-and-replay, at least once or exactly once.

At least once (the default), outputs are visible as soon as they are decided; a crash rolls
the state back to the last commit and decides the same records again, so the dispatch log
can hold identical copies of earlier outputs, exactly as a real restart without
transactions does. Exactly once (``exactly_once``), outputs become visible at the commit
that covers them and a crash drops the uncommitted ones, as an aborted transaction does;
only then does the processor pre-grant (``policy.pregrant_lease_ms``), as the runtime
(``processor.policy.under_guarantee``) allows.

Each decision's outputs leave at the world time the record was first decided (``sent_ms``
to ``decide``): a record decided again after a crash sends copies of outputs that were
visible since then, so its deadlines count from the same time and the replay decides as the
first run did. (The runtime reads its clock once per batch, and a batch's records carry
broker times before it, so a batch decided again fires no timer its first run did not.)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ledger_stream.domain import Policy, absent, decide, due_ms
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import KeyState

DISPATCH_TYPES = (ev.Dispatch, ev.Grant, ev.Held, ev.Reconcile, ev.Done)


@dataclass(frozen=True, slots=True)
class Logged:
    event: object
    ts: int  # broker timestamp


@dataclass
class SimProcessor:
    policy: Policy
    exactly_once: bool = False
    log: list[Logged] = field(default_factory=list)  # intents + attempts + ticks
    dispatch: list[Logged] = field(default_factory=list)
    receipts: list[ev.Receipt] = field(default_factory=list)
    alerts: list[ev.Alert] = field(default_factory=list)
    states: dict[str, KeyState] = field(default_factory=dict)
    clock: int = 0
    position: int = 0
    committed: int = 0
    _snapshot: tuple[dict[str, KeyState], int] = field(default_factory=lambda: ({}, 0))
    claims_seen: set[str] = field(default_factory=set)
    first_decided: dict[int, int] = field(default_factory=dict)  # log position -> world time
    # Exactly once: the outputs decided since the last commit, visible at the next one.
    uncommitted: list[Logged] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.exactly_once and self.policy.pregrant_lease_ms:
            # At least once can write one Dispatch twice: two records of one pre-grant.
            self.policy = replace(self.policy, pregrant_lease_ms=0)

    def append(self, event: object, now: int) -> None:
        self.log.append(Logged(event, now))

    def behind(self) -> bool:
        return self.position < len(self.log)

    def step(self, now: int) -> None:
        """Decide the next input record (and the deadlines its timestamp passes)."""
        logged = self.log[self.position]
        sent = self.first_decided.setdefault(self.position, now)
        self.position += 1
        self.clock = max(self.clock, logged.ts)
        self._fire_due(now, sent)
        if isinstance(logged.event, ev.Tick):
            return
        event = logged.event
        key = event.key  # type: ignore[attr-defined]
        if isinstance(event, ev.AttemptClaim):
            self.claims_seen.add(event.claim_id)
        self._apply(key, event, now, sent, logged.ts)

    def _fire_due(self, now: int, sent: int) -> None:
        due = sorted((d, k) for k, s in self.states.items()
                     if (d := due_ms(s, self.policy)) is not None and d <= self.clock)
        for at, key in due:
            self._apply(key, ev.Timer(key, at), now, sent)

    def _apply(self, key: str, event: object, now: int, sent: int, appended: int = 0
               ) -> None:
        """Decide ``event`` for ``key``; ``appended``: its record's timestamp (the
        processor's: a fenced claim is judged by it, 0 for a timer)."""
        state = self.states.get(key) or absent(key)
        decision = decide(state, event, self.policy, self.clock,  # type: ignore[arg-type]
                          sent_ms=sent, appended_ms=appended)
        if decision.state is not state:
            self.states[key] = decision.state
        logged = [Logged(out, now) for out in decision.outputs]
        if self.exactly_once:
            self.uncommitted += logged
        else:
            self._publish(logged)

    def _publish(self, outputs: list[Logged]) -> None:
        for logged in outputs:
            out = logged.event
            if isinstance(out, DISPATCH_TYPES):
                self.dispatch.append(logged)
            elif isinstance(out, ev.Receipt):
                self.receipts.append(out)
            elif isinstance(out, ev.Alert):
                self.alerts.append(out)

    def commit(self) -> None:
        self.committed = self.position
        self._snapshot = (dict(self.states), self.clock)
        self._publish(self.uncommitted)
        self.uncommitted = []

    def crash(self) -> None:
        """Restart from the last commit: state and clock as they were, inputs decided again
        (exactly once: what was decided since is dropped, never seen)."""
        states, clock = self._snapshot
        self.states, self.clock, self.position = dict(states), clock, self.committed
        self.uncommitted = []

    def state(self, key: str) -> KeyState:
        return self.states.get(key) or absent(key)
