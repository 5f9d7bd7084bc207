"""The client's receipt cache: a duplicate of a key this client saw settle, answered at once.

When a ``submit`` of this client created a key's effect and saw it succeed, the ledger
answers every later intent for that key with the same arguments the same way until the
key's replay window ends: ``already_done`` with the original outcome (``decide``: a
settled key, the same arguments hash, a valid or absent approval). So the client can give
that answer itself, built exactly as the processor builds it (``receipt_for``: the same
receipt id, status, attempts, external id, detail and holder; only ``at_ms`` is the
client's clock). The intent is still produced, for the record, the
key's timeline and its alerts, without waiting for the acknowledgement; a delivery that
fails is logged as an error, counted and listed (``unrecorded``), and the key leaves the
cache, so its next duplicate goes through the ledger.

What is never answered here (the ledger is asked, as without the cache):
- other arguments (a conflict: the ledger rejects it and raises its alert);
- a key whose effect this client did not create and see succeed: pending, held, rejected,
  waiting for an operator (``needs_reconciliation``), failed (a late report of the effect
  can still turn it succeeded), or answered ``already_done`` to this client (the answer's
  time is not when the key settled, so its window cannot be told);
- an intent that carries an approval, or a key whose settled intent carried one (the ledger
  checks the approval, and the action may need one);
- an action this client saw frozen (an answer with reason ``frozen``) or refused for its
  approval, from then on for this cache's lifetime;
- a key settled longer ago than ``ttl_s`` (by the processor's time of the settling receipt
  and by this client's clock since it learned it, whichever is longer), or than its
  action's replay window when this client's settings name a shorter one (the ledger seals
  a key after it and answers ``expired_key``): keep ``ttl_s`` below the shortest replay
  window of the actions this client submits when the client's settings do not hold them;
- a key learned only from the answer to its settling intent submitted again (the retry a
  pending answer invites): the processor wrote that receipt when it answered, not when the
  key settled, so the window cannot be told from it;
- an action this client's settings say needs an approval (the ledger refuses a duplicate
  without one).

Each tenant (the key's first part) has its own bounded map, least recently used first out,
in this client alone: a client holds one credential, and a tenant only ever reads the
entries of its own keys. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ledger_stream.domain import events as ev
from ledger_stream.domain import ids
from ledger_stream.domain.keys import tenant_of
from ledger_stream.settings.loading import Settings

# Succeeded only: a failed key still turns succeeded when a late report of its effect comes
# (``late_effect``), and the ledger then answers a duplicate "succeeded".
FINAL = frozenset({ev.ReceiptStatus.SUCCEEDED})
UNRECORDED_KEPT = 1_000  # failed deliveries listed (the oldest dropped past it)
# Bounds of one client's memory whatever the tenants (a gateway serves many): settled keys
# across all tenants (the least recently used tenant's oldest first out), and the actions
# seen frozen or refused for their approval (past it the cache answers nothing: forgetting
# one would answer for an action the ledger refuses).
TOTAL_KEPT = 100_000
REFUSED_KEPT = 10_000


@dataclass(frozen=True, slots=True)
class Settled:
    """What the ledger knows of a settled key, as its receipts said."""

    receipt: ev.Receipt  # a receipt of the key's final state
    learned_at: float  # time.monotonic() when this client learned it


class ReceiptCache:
    """Settled keys of one client, per tenant, bounded (``size`` keys per tenant, ``total``
    across tenants)."""

    def __init__(self, size: int = 10_000, ttl_s: float = 60.0, *, tenants: int = 1_000,
                 total: int = TOTAL_KEPT,
                 windows_s: Mapping[str, float] | None = None,
                 approval_actions: Iterable[str] = ()) -> None:
        """``windows_s``: replay windows by action (seconds) shorter than ``ttl_s``, which
        bound that action's keys; ``approval_actions``: actions never answered here."""
        if size < 1 or ttl_s <= 0 or tenants < 1 or total < 1:
            raise ValueError("size, tenants and total must be at least 1, ttl_s above 0")
        self.size, self.ttl_s, self._tenants_max, self.total = size, ttl_s, tenants, total
        self._count = 0  # settled keys held, all tenants
        self._windows_s = dict(windows_s or {})
        self._approval_actions = frozenset(approval_actions)
        self._tenants: OrderedDict[str, OrderedDict[str, Settled]] = OrderedDict()
        self._refused: set[tuple[str, str]] = set()  # (tenant, action): frozen or approval
        self._lock = threading.Lock()
        self.hits = 0  # duplicates answered from this cache (counted by count_hit)
        self.unrecorded: list[str] = []  # "key event_id: why" of intents Kafka refused

    @classmethod
    def from_settings(cls, settings: Settings) -> ReceiptCache | None:
        """The cache ``settings.sdk`` asks for (None: off), bounded by the replay windows
        and approval rules the same settings give the ledger (``policy``, ``topics``)."""
        sdk = settings.sdk
        if not sdk.receipt_cache:
            return None
        ledger_s = settings.topics.replay_window_ms / 1000
        windows = {action: min(rules.replay_window_ms / 1000, ledger_s)
                   for action, rules in settings.policy.actions.items()
                   if rules.replay_window_ms is not None}
        approval = {*settings.policy.required_actions,
                    *(a for a, rules in settings.policy.actions.items() if rules.approval)}
        return cls(sdk.receipt_cache_size, min(sdk.receipt_cache_ttl_s, ledger_s),
                   windows_s=windows, approval_actions=approval)

    def learn(self, intent: ev.Intent, receipt: ev.Receipt) -> None:
        """Note ``receipt``, the answer a submit of ``intent`` got from the ledger."""
        tenant = tenant_of(intent.key)
        with self._lock:
            if receipt.reason is ev.Reason.FROZEN or receipt.reason is ev.Reason.APPROVAL:
                if len(self._refused) < REFUSED_KEPT:  # at the bound answer() gives nothing
                    self._refused.add((tenant, intent.action))
                self._drop_locked(tenant, intent.key)
                return
            # Only this intent's own effect, settled, by the change of the key itself (no
            # origin: not an answer to an intent): its receipt's time is when the key
            # settled (an answer's, even to this same intent sent again, is the answer's,
            # and the window counts from the settling), and it names the arguments held.
            final = receipt.status in FINAL and receipt.key_status is receipt.status \
                and receipt.effect_intent_id == intent.event_id == receipt.intent_event_id \
                and receipt.args_hash == intent.args_hash and intent.approval is None \
                and receipt.origin == ""
            if not final:
                self._drop_locked(tenant, intent.key)  # what was known is not any more
                return
            keys = self._tenants.pop(tenant, None) or OrderedDict()
            self._tenants[tenant] = keys
            self._count -= keys.pop(intent.key, None) is not None
            keys[intent.key] = Settled(receipt, time.monotonic())
            self._count += 1
            while len(keys) > self.size:
                keys.popitem(last=False)
                self._count -= 1
            while len(self._tenants) > self._tenants_max:
                self._count -= len(self._tenants.popitem(last=False)[1])
            while self._count > self.total:  # the least recently used tenant's oldest
                oldest_tenant, oldest = next(iter(self._tenants.items()))
                oldest.popitem(last=False)  # never empty: _drop_locked removes an emptied map
                self._count -= 1
                if not oldest:
                    del self._tenants[oldest_tenant]

    def answer(self, intent: ev.Intent) -> ev.Receipt | None:
        """The ledger's answer to ``intent`` when this cache may give it, else None."""
        tenant = tenant_of(intent.key)
        with self._lock:
            if intent.approval is not None or (tenant, intent.action) in self._refused \
                    or intent.action in self._approval_actions \
                    or len(self._refused) >= REFUSED_KEPT:
                return None
            keys = self._tenants.get(tenant)
            if keys is None:
                return None
            settled = keys.get(intent.key)
            if settled is None or settled.receipt.args_hash != intent.args_hash:
                return None
            now_ms = int(time.time() * 1000)
            age_s = max(now_ms - settled.receipt.at_ms, 0) / 1000
            ttl_s = min(self.ttl_s, self._windows_s.get(intent.action, self.ttl_s))
            if max(age_s, time.monotonic() - settled.learned_at) >= ttl_s:
                self._drop_locked(tenant, intent.key)
                return None
            keys.move_to_end(intent.key)  # used: the last to go
            self._tenants.move_to_end(tenant)
        return _duplicate_answer(settled.receipt, intent, now_ms)

    def count_hit(self) -> None:
        """Count one duplicate answered from this cache: called once its intent is handed to
        Kafka, not by ``answer`` (an answer left to the ledger after all is no hit)."""
        with self._lock:
            self.hits += 1

    def forget(self, key: str, why: str) -> None:
        """Drop ``key`` (its intent was not recorded: ``why``); listed in ``unrecorded``."""
        with self._lock:
            self._drop_locked(tenant_of(key), key)
            self.unrecorded.append(why)
            del self.unrecorded[:-UNRECORDED_KEPT]

    def _drop_locked(self, tenant: str, key: str) -> None:
        keys = self._tenants.get(tenant)
        if keys is not None:
            self._count -= keys.pop(key, None) is not None
            if not keys:
                del self._tenants[tenant]


def _duplicate_answer(settled: ev.Receipt, intent: ev.Intent, now_ms: int) -> ev.Receipt:
    """The receipt the processor writes for ``intent`` on a key in ``settled``'s final state
    (``decide._intent`` on a terminal key: ``receipt_for(state, intent.event_id, now,
    detail=state.status_detail)``), at this client's ``now_ms``."""
    status = settled.key_status
    return ev.Receipt(
        receipt_id=ids.receipt_id(settled.key, intent.event_id, settled.attempts, status.value),
        key=settled.key, intent_event_id=intent.event_id, status=status,
        reason=ev.Reason.NONE, args_hash=settled.args_hash, attempts=settled.attempts,
        at_ms=now_ms, external_id=settled.external_id, detail=settled.detail,
        key_status=status, origin=intent.origin.value,
        effect_intent_id=settled.effect_intent_id)
