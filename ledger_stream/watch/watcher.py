"""A watcher reads a target's own record of its effects and reports each one to the ledger.

Each effect becomes a ``ReconcileResult(found)`` on the attempts topic under its operation
key, with the target's id for it and the claim id ``watch:<target>``: what a lookup by key
would say. The processor decides it like any lookup (DESIGN §5):

- a key never reserved: ``effect_without_intent`` (someone called the target around the
  ledger);
- a key settled with another effect: ``duplicate_effect`` (a second effect for one key);
- a key settled with this effect: nothing (the ledger knew it);
- a key still in flight: settled by it (the target holds the effect);
- a key answered ``failed``: ``late_effect``.

The operation key of an effect is its idempotency key when that is an operation key, or else
the key ``--key-template`` makes of its body (``acme/refund/{invoice}``), so a call that
bypassed the ledger with an idempotency key of its own is still matched to its business
key. An effect that maps to no key raises ``effect_without_intent`` directly, under the key
``unmapped/<target>/<its id>``.

The watcher keeps the ids it reported in memory: after a restart it reports every effect
again, which the processor treats as the lookups they are (nothing changes for an effect it
knows).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import InvalidKeyError, checked_key, sha256_hex
from ledger_stream.domain.outputs import alert_for
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.logs import log_fields

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SeenEffect:
    """One effect as the target records it."""

    idempotency_key: str
    external_id: str  # the target's id for it
    body: Any = None  # the request body the target kept (for the key template), if any


def key_for(effect: SeenEffect, template: str | None) -> str | None:
    """The effect's operation key: its idempotency key when that is one, else the
    template filled from its body; None when neither gives a key."""
    try:
        return checked_key(effect.idempotency_key)
    except InvalidKeyError:
        pass
    if not template or not isinstance(effect.body, dict):
        return None
    try:
        return checked_key(template.format(**effect.body))
    except (KeyError, IndexError, ValueError, InvalidKeyError):
        return None


class Watcher:
    def __init__(self, name: str, effects: Callable[[], Iterable[SeenEffect]],
                 producer: EventProducer, template: str | None = None) -> None:
        """``effects`` lists the target's effects (all of them, or the newest)."""
        self.name = name
        self._effects = effects
        self._producer = producer
        self._template = template
        self._reported: set[str] = set()
        self.reported = self.unmapped = 0

    def poll(self) -> int:
        """Report the effects not reported yet; how many. Raises DeliveryFailed when the
        reports were not acknowledged (they are reported again at the next poll)."""
        fresh = [e for e in self._effects() if e.external_id not in self._reported]
        now = int(time.time() * 1000)
        for effect in fresh:
            key = key_for(effect, self._template)
            if key is None:
                self.unmapped += 1
                source = f"watch:{self.name}/{effect.external_id}"
                self._producer.send("alerts", alert_for(
                    f"unmapped/{self.name}/{effect.external_id}",
                    ev.AlertKind.EFFECT_WITHOUT_INTENT, source,
                    f"an effect at {self.name} (id {effect.external_id}, idempotency key "
                    f"{sha256_hex(effect.idempotency_key)[:12]}) maps to no operation key", now))
                continue
            self._producer.send("attempts", ev.ReconcileResult(
                f"watch-{uuid.uuid4().hex}", key, 1, f"watch:{self.name}",
                ev.ReconcileStatus.FOUND, True, now, effect.external_id))
        if fresh:
            self._producer.flush()
        for effect in fresh:
            self._reported.add(effect.external_id)
        self.reported += len(fresh)
        if fresh:
            logger.info("effects reported", extra=log_fields(
                target=self.name, effects=len(fresh), unmapped=self.unmapped))
        return len(fresh)

    def run(self, stop: threading.Event, interval_s: float) -> None:
        """Poll until ``stop``; a failed poll is logged and tried again."""
        while not stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - the target or Kafka: try again
                logger.warning("poll failed; retrying", extra=log_fields(
                    target=self.name, error=str(exc)))
            stop.wait(interval_s)
