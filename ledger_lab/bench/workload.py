"""The benchmark's input: Avro intents generated once from a seed, shared by every arm.

A workload of ``intents`` events over ``keys`` operation keys: each key's first intent is
fresh (it reserves the key and dispatches), and the rest repeat an earlier key, either as a
**duplicate** (same material arguments, a new event id: a resumed or replayed step) or as a
**conflict** (the same key with different arguments: a fork that changed an amount). The
same seed gives the same bytes, so every arm and every run decides the same events.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import canonical_json, sha256_hex
from ledger_stream.serde import AvroCodec

BASE_AT_MS = 1_767_225_600_000  # 2026-01-01T00:00Z: event time comes from the data
TENANTS = 8


class WorkloadError(ValueError):
    """Shares and counts that describe no workload (e.g. more keys than intents)."""


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """How many intents over how many keys, and which share repeats a key.

    ``duplicate_share`` and ``conflict_share`` are fractions of all intents. ``keys`` is
    derived from them unless given; when given, the intents beyond the first one per key
    are split between duplicates and conflicts in the ratio of the two shares.
    """

    intents: int
    duplicate_share: float = 0.10
    conflict_share: float = 0.02
    keys: int | None = None
    seed: int = 1
    key_space: str = "bench"  # distinguishes the key sets of unrelated workloads

    def counts(self) -> tuple[int, int, int]:
        """(fresh, duplicates, conflicts); fresh is the number of distinct keys."""
        if self.intents < 1:
            raise WorkloadError("a workload needs at least one intent")
        if not (self.duplicate_share >= 0 and self.conflict_share >= 0
                and self.duplicate_share + self.conflict_share < 1):
            raise WorkloadError("duplicate and conflict shares must be >= 0 and sum to < 1")
        repeat_share = self.duplicate_share + self.conflict_share
        fresh = self.keys if self.keys is not None else max(
            1, round(self.intents * (1 - repeat_share)))
        if not 1 <= fresh <= self.intents:
            raise WorkloadError(f"keys must be between 1 and intents ({self.intents})")
        repeats = self.intents - fresh
        conflicts = round(repeats * self.conflict_share / repeat_share) if repeat_share else 0
        return fresh, repeats - conflicts, conflicts


@dataclass(frozen=True, slots=True)
class Workload:
    """The encoded intents in production order: (message key, Avro value) pairs."""

    spec: WorkloadSpec
    records: tuple[tuple[bytes, bytes], ...]
    kinds: str  # per record: "f" fresh, "d" duplicate, "c" conflict
    fresh: int
    duplicates: int
    conflicts: int

    def __len__(self) -> int:
        return len(self.records)

    def counts(self, limit: int | None = None) -> dict[str, int]:
        """How many fresh, duplicate and conflicting intents the first ``limit`` hold."""
        kinds = self.kinds[:limit]
        return {"fresh": kinds.count("f"), "duplicate": kinds.count("d"),
                "conflict": kinds.count("c")}

    def facts(self) -> dict[str, object]:
        n = len(self.records)
        return {
            "intents": n, "keys": self.fresh, "duplicates": self.duplicates,
            "conflicts": self.conflicts, "duplicate_share": round(self.duplicates / n, 4),
            "conflict_share": round(self.conflicts / n, 4), "seed": self.spec.seed,
            "mean_value_bytes": round(sum(len(v) for _, v in self.records) / n, 1),
        }


def intent_for(key_space: str, index: int, args: dict[str, object], event_id: str,
               at_ms: int, origin: ev.Origin = ev.Origin.FRESH) -> ev.Intent:
    """The intent for business object ``index`` of ``key_space`` with ``args``."""
    tenant = f"tenant-{index % TENANTS}"
    args_json = canonical_json(args)
    return ev.Intent(
        event_id=event_id, key=f"{tenant}/refund/{key_space}-{index:08d}", tenant=tenant,
        action="refund", target="payments", args_json=args_json,
        args_hash=sha256_hex(args_json),
        workflow=ev.Workflow("refund-agent", "1.4", f"thread-{index}", "issue_refund"),
        at_ms=at_ms, payload_json='{"note":"benchmark"}', origin=origin,
    )


def iter_intents(spec: WorkloadSpec) -> Iterator[tuple[str, ev.Intent]]:
    """(kind, intent) in workload order, deterministic from ``spec``."""
    fresh, duplicates, conflicts = spec.counts()
    rng = random.Random(spec.seed)
    kinds = ["d"] * duplicates + ["c"] * conflicts
    rng.shuffle(kinds)
    # Every repeat needs an earlier key: interleave repeats into the fresh run at random
    # positions after the first fresh intent.
    slots = sorted(rng.randrange(1, fresh + 1) for _ in kinds)
    order: list[str] = []
    j = 0
    for i in range(fresh):
        while j < len(slots) and slots[j] <= i:
            order.append(kinds[j])
            j += 1
        order.append("f")
    order.extend(kinds[j:])
    seen = 0
    for position, kind in enumerate(order):
        event_id = f"{rng.getrandbits(128):032x}"
        at_ms = BASE_AT_MS + position
        if kind == "f":
            yield kind, intent_for(spec.key_space, seen, refund_args(seen, 0), event_id, at_ms)
            seen += 1
            continue
        index = rng.randrange(seen)
        change = 1 if kind == "c" else 0
        origin = ev.Origin.FORK if kind == "c" else ev.Origin.REPLAY
        yield kind, intent_for(spec.key_space, index, refund_args(index, change), event_id, at_ms,
                               origin)


def generate(spec: WorkloadSpec, codec: AvroCodec | None = None,
             limit: int | None = None) -> Workload:
    """Encode the workload (or its first ``limit`` intents) once: single-object Avro, the
    project's serde."""
    codec = codec or AvroCodec()
    kinds: list[str] = []
    records: list[tuple[bytes, bytes]] = []
    for kind, intent in iter_intents(spec):
        if len(kinds) == limit:
            break
        kinds.append(kind)
        records.append((intent.key.encode("utf-8"), codec.encode(intent)))
    text = "".join(kinds)
    return Workload(spec, tuple(records), text, text.count("f"), text.count("d"),
                    text.count("c"))


def refund_args(index: int, change: int) -> dict[str, object]:
    """The material arguments of business object ``index``; ``change`` alters the amount
    (a conflicting intent for the same key)."""
    return {"amount": 100 + index % 9_000 + change, "currency": "EUR",
            "invoice": f"inv-{index}", "to": f"cust-{index % 5_000}"}
