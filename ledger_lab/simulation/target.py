"""The simulated target: the ground truth every invariant is checked against.

It keeps its own ledger of effects, like the payments sandbox: every request that reached
its commit point, with the key, the claim (attempt id) and the arguments. A deduplicating
target answers a second request for a key with the first effect's receipt; one that does
not applies every request. A queryable target answers lookups by key exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Effect:
    key: str
    external_id: str
    claim_id: str
    args_hash: str
    at_ms: int
    # It reached the commit point after its grant's lease ended: the one window no lease
    # closes (docs/design.md, 'Leases and the one window no lease closes': a sender frozen
    # between its lease check and the send, or a request held up on the way), where a second
    # effect at a target that does not deduplicate cannot be prevented, only reported.
    late: bool


@dataclass
class SimTarget:
    deduplicates: bool
    queryable: bool
    effects: list[Effect] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (key, claim id) received

    def commit(self, key: str, claim_id: str, args_hash: str, at_ms: int,
               late: bool) -> str:
        """The request reached the commit point: the receipt id it answers with."""
        self.calls.append((key, claim_id))
        if self.deduplicates:
            for effect in self.effects:
                if effect.key == key:
                    return effect.external_id
        ext = f"eff-{len(self.effects) + 1}"
        self.effects.append(Effect(key, ext, claim_id, args_hash, at_ms, late))
        return ext

    def lookup(self, key: str) -> str | None:
        for effect in self.effects:
            if effect.key == key:
                return effect.external_id
        return None

    def of(self, key: str) -> list[Effect]:
        return [e for e in self.effects if e.key == key]
