"""Simulated connector instances: the real ``ConnectorCore`` each, driven like the Kafka
runtime drives it, with clocks that may be skewed, and processes that crash, freeze and
lose their partition.

One consumer group reads the key's dispatch partition; one member owns it at a time and
reads from the group's committed offset. A fence (a pre-granted dispatch's synchronous
commit) succeeds only for the partition's current owner, as the group coordinator accepts a
commit only from a member of its current generation, and moves the committed offset at
once. What an instance asked for (produces, calls, lookups) travels on ``wire`` items that
other steps complete, so every interleaving of network, target and process is reachable.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from ledger_stream.connector.commands import (
    Call,
    Command,
    Commit,
    Fence,
    Lookup,
    LookupAnswer,
    Produce,
    Record,
    Stop,
)
from ledger_stream.connector.core import ConnectorCore
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.domain import events as ev


@dataclass(eq=False)
class Instance:
    name: str
    core: ConnectorCore
    skew_ms: int
    alive: bool = True
    frozen_until: int = 0
    frozen_at: int = 0
    owns: bool = False
    lost: bool = False  # the group moved its partition while it was frozen
    position: int = 0
    backlog_mark: int = 0  # dispatch offsets below this were there at assignment
    outbox: deque[Command] = field(default_factory=deque)
    alias: str = ""  # the process number a restarted instance keeps (traces name it)

    def __post_init__(self) -> None:
        self.alias = self.alias or self.name

    def clock(self, now: int) -> int:
        return now + self.skew_ms

    def awake(self, now: int) -> bool:
        return self.alive and now >= self.frozen_until


@dataclass(eq=False)
class Wire:
    """One operation in flight. ``stage`` for calls: checked (lease checked, not sent),
    sent (at the target), answered / dropped (response on the wire / lost)."""

    kind: str  # "produce" | "call" | "lookup"
    inst: Instance
    job_id: int
    command: Produce | Call | Lookup
    stage: str = ""
    sent_at: int = 0
    fault: str = ""  # produce: lost | nack; call: refuse | reject | drop | slow
    status: ev.OutcomeStatus = ev.OutcomeStatus.SUCCEEDED
    external_id: str = ""
    timed_out: bool = False  # the caller gave up (reported unknown); nobody listens
    frozen_window: bool = False  # the caller froze after its lease check, before sending
    lease_until: int = 0  # the grant's lease end: the request may commit until then
    held_until: int = 0  # a delayed produce reaches the broker only after this


@dataclass
class Fleet:
    options: ConnectorOptions
    target_name: str
    deduplicates: bool
    queryable: bool
    instances: list[Instance] = field(default_factory=list)
    wire: list[Wire] = field(default_factory=list)
    committed: int = 0
    owner: Instance | None = None
    _ids: int = 0

    def new_id(self) -> str:
        self._ids += 1
        return f"i{self._ids}"

    def spawn(self, skew_ms: int) -> Instance:
        name = f"conn{len(self.instances)}"
        opts = replace(self.options, instance_id=name)
        core = ConnectorCore(self.target_name, self.deduplicates, self.queryable, opts,
                             self.new_id)
        inst = Instance(name, core, skew_ms)
        self.instances.append(inst)
        return inst

    def assign(self, inst: Instance, dispatch_len: int) -> None:
        self.owner, inst.owns, inst.lost = inst, True, False
        inst.position, inst.backlog_mark = self.committed, dispatch_len
        inst.core.assigned(0)

    def revoke(self, inst: Instance, now: int) -> None:
        """The group takes the partition away (rebalance, session timeout)."""
        if self.owner is inst:
            self.owner = None
        inst.owns = False
        if inst.awake(now):
            inst.outbox.extend(inst.core.revoked([0], inst.clock(now)))
        elif inst.alive:
            inst.lost = True  # it learns when it wakes

    def crash(self, inst: Instance) -> None:
        inst.alive, inst.owns = False, False
        inst.outbox.clear()
        if self.owner is inst:
            self.owner = None
        # Calls not yet sent die with the process; what is on the network goes on.
        self.wire = [w for w in self.wire if not (w.inst is inst and w.stage == "checked")]

    def read(self, inst: Instance, dispatch: list, now: int) -> None:
        logged = dispatch[inst.position]
        rec = Record(0, inst.position, logged.event, logged.ts,
                     inst.position < inst.backlog_mark)
        inst.position += 1
        inst.outbox.extend(inst.core.record(rec, inst.clock(now)))

    def take(self, inst: Instance, now: int, fence_fault: str = "") -> Command | None:
        """Turn the instance's next command into a wire item (or do it at once).
        ``fence_fault``: a Fence is refused (fence_refused) or lands unseen (fence_lost)."""
        cmd = inst.outbox.popleft()
        if isinstance(cmd, Produce):
            self.wire.append(Wire("produce", inst, cmd.job_id, cmd))
        elif isinstance(cmd, Call):
            if cmd.start_by_ms and inst.clock(now) > cmd.start_by_ms:
                inst.outbox.extend(inst.core.called(
                    cmd.job_id, ev.OutcomeStatus.NOT_CALLED, "",
                    "lease ran out before the call", inst.clock(now)))
            else:
                self.wire.append(Wire("call", inst, cmd.job_id, cmd, stage="checked"))
        elif isinstance(cmd, Lookup):
            self.wire.append(Wire("lookup", inst, cmd.job_id, cmd))
        elif isinstance(cmd, Commit):
            if self.owner is inst:
                self.committed = cmd.offset
        elif isinstance(cmd, Fence):
            ok = self.owner is inst and inst.owns and not inst.lost
            if ok and fence_fault != "fence_refused":
                self.committed = cmd.offset
            ok = ok and not fence_fault
            inst.outbox.extend(inst.core.fenced(cmd.job_id, ok, inst.clock(now)))
        elif isinstance(cmd, Stop):
            self.crash(inst)
        return cmd

    def lookup_answer(self, wire: Wire, found: str | None, unavailable: str, now: int) -> None:
        inst = wire.inst
        self.wire.remove(wire)
        if inst.alive:
            inst.outbox.extend(inst.core.looked_up(
                wire.job_id, LookupAnswer(found, unavailable), inst.clock(now)))
