"""A watcher reads a target's own record of its effects and reports each one to the ledger.

An effect made under its operation key (its idempotency key is one: the ledger's own
dispatch, or a caller that used the ledger's key) becomes a ``ReconcileResult(found)`` on the
attempts topic with the target's id for it and the claim id ``watch:<target>``: what a
lookup by key would say. The processor decides it like any lookup (docs/design.md,
'Reconciliation by lookup'):

- a key never reserved, or whose effect is for another target: ``effect_without_intent``
  (never settled by it);
- a key settled with another effect: ``duplicate_effect`` (a second effect for one key);
- a key settled with this effect: nothing (the ledger knew it);
- a key still in flight: settled by it (the target holds the effect under the key);
- a key answered ``failed``: ``late_effect``.

An effect made under another idempotency key did not come through the ledger, whatever
its business key: it never settles or touches a key. The watcher raises
``effect_without_intent`` for it directly, under the key ``--key-template`` makes of its
body (``acme/refund/{invoice}``: the refund it repeats or pre-empts), or under
``unmapped/<target>/<hash of its id>`` when the template gives no key. Its alert id derives
from the target and the effect's id, so a repeat is recognisable as the same alert.

Reports are idempotent in their ids: the found report's event id derives from the target
and the effect's id. The watcher keeps the ids it reported in memory; after a restart it
reports every effect again, which the processor takes as the lookups they are, except that
a known second effect is counted again (``duplicate_effects``, and another alert). Sources
(sources.py): the sandbox and a Maildir are read whole on every poll (fine for tests,
demos and a mailbox that is emptied); a PostgreSQL table incrementally.
"""

from __future__ import annotations

import logging
import string
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.domain.effects import EXTERNAL_ID_LIMIT, WATCH_CLAIM
from ledger_stream.domain.keys import (
    KEY_LIMIT,
    UNMAPPED_TENANT,
    InvalidKeyError,
    checked_key,
    sha256_hex,
)
from ledger_stream.domain.outputs import alert_for
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.logs import log_fields

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SeenEffect:
    """One effect as the target records it.

    ``trusted``: the record itself is the target's (the sandbox's ledger, a table the effect
    writes). A mailbox is not: anyone can mail it, so its mails only ever raise alerts, and
    never settle or change a key. ``repeat``: 2 for the second copy of one of the ledger's
    mails, 3 for the third... (0: not a repeat)."""

    idempotency_key: str
    external_id: str  # the target's id for it
    body: Any = None  # the request body the target kept (for the key template), if any
    trusted: bool = True
    repeat: int = 0


# What a template's fields are filled with to see whether it can make a key: a plain value,
# a number (a format spec such as {n:06d}); in a template with no slash of its own, a whole
# key (a field carrying the key itself).
_FILLERS: tuple[str | int, ...] = ("x", 0, "t/a/x")


def check_template(template: str) -> None:
    """ValueError unless ``template`` can make an operation key of a body: balanced braces,
    each field a key of the body (not a position, an attribute or an index), at least one,
    and filled in, tenant/action/business-id (each field a plain value or, in a template
    with no slash of its own, a whole key)."""
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(template)
                  if field is not None]
    except ValueError as exc:
        raise ValueError(f"--key-template {template!r}: {exc}") from None
    bad = [field for field in fields
           if not field or field.isdigit() or "." in field or "[" in field]
    if bad or not fields:
        raise ValueError(f"--key-template {template!r}: each {{FIELD}} names a field of the "
                         "effect's body, e.g. 'acme/refund/{invoice}'"
                         + (f" (not {{{bad[0]}}})" if bad else ", and one at least"))
    problem = ""
    for filler in _FILLERS if "/" not in template else _FILLERS[:2]:
        try:
            checked_key(template.format(**{field: filler for field in fields}))
            return
        except (ValueError, TypeError, LookupError, InvalidKeyError) as exc:
            problem = problem or f"{type(exc).__name__}: {exc}"
    raise ValueError(f"--key-template {template!r} makes no operation key: {problem}")


def key_for(effect: SeenEffect, template: str | None) -> str | None:
    """The effect's operation key: its idempotency key when that is one, else the
    template filled from its body; None when neither gives a key."""
    try:
        return checked_key(effect.idempotency_key)
    except InvalidKeyError:
        pass
    return _templated(effect, template)


def _templated(effect: SeenEffect, template: str | None) -> str | None:
    """The key ``template`` makes of the effect's body, or None (any failure: the body is
    the target's data, not trusted)."""
    if not template or not isinstance(effect.body, dict):
        return None
    try:
        key = template.format(**{k: v for k, v in effect.body.items()
                                 if isinstance(v, str | int)})
        return checked_key(key) if len(key) <= KEY_LIMIT else None
    except Exception:  # noqa: BLE001 - KeyError, TypeError, AttributeError, ValueError...
        return None


class Watcher:
    def __init__(self, name: str, effects: Callable[[], Iterable[SeenEffect]],
                 producer: EventProducer, template: str | None = None,
                 deduplicates: bool = True) -> None:
        """``effects`` lists the target's effects (all of them, or the newest: then its
        ``reported(effects)`` is called once their reports were acknowledged);
        ``deduplicates``: the target answers a repeated idempotency key with the first
        effect (the sandbox does), so one key never has two effects there."""
        self.name = name
        self._effects = effects
        self._producer = producer
        self._template = template
        self._deduplicates = deduplicates
        self._reported: set[str] = set()
        self.reported = self.around = 0

    def poll(self) -> int:
        """Report the effects not reported yet; how many. Raises DeliveryFailed when the
        reports were not acknowledged (they are reported again at the next poll)."""
        read = list(self._effects())
        fresh = [e for e in read if e.external_id not in self._reported]
        now = int(time.time() * 1000)
        for effect in fresh:
            self._report(effect, now)
        if fresh:
            self._producer.flush()
        for effect in fresh:
            self._reported.add(effect.external_id)
        acknowledge = getattr(self._effects, "reported", None)
        if read and acknowledge is not None:  # an incremental source moves past them all
            acknowledge(read)
        self.reported += len(fresh)
        if fresh:
            logger.info("effects reported", extra=log_fields(
                target=self.name, effects=len(fresh), around_the_ledger=self.around))
        return len(fresh)

    def _report(self, effect: SeenEffect, now: int) -> None:
        ident = sha256_hex(f"{self.name}\n{effect.external_id}")[:32]
        shown = effect.external_id if len(effect.external_id) <= EXTERNAL_ID_LIMIT \
            else f"sha256:{sha256_hex(effect.external_id)[:32]}"
        try:
            own = checked_key(effect.idempotency_key)
        except InvalidKeyError:
            own = None
        if own is not None and effect.trusted:
            self._producer.send("attempts", ev.ReconcileResult(
                f"watch-{ident}", own, 1, f"{WATCH_CLAIM}{self.name}", ev.ReconcileStatus.FOUND,
                self._deduplicates, now, shown))
            return
        if own is not None:  # one of the ledger's mails: only a second copy is news
            if effect.repeat > 1:
                self._producer.send("alerts", alert_for(
                    own, ev.AlertKind.DUPLICATE_EFFECT, f"watch:{self.name}/{ident}",
                    f"copy {effect.repeat} of the ledger's message for this key at "
                    f"{self.name} (id {shown}): the relay delivered it again", now))
            return
        self.around += 1
        key = _templated(effect, self._template) or f"{UNMAPPED_TENANT}/{self.name}/{ident}"
        self._producer.send("alerts", alert_for(
            key, ev.AlertKind.EFFECT_WITHOUT_INTENT, f"watch:{self.name}/{ident}",
            f"an effect at {self.name} (id {shown}) made under idempotency key "
            f"{sha256_hex(effect.idempotency_key)[:12]}, not through the ledger", now))

    def run(self, stop: threading.Event, interval_s: float) -> None:
        """Poll until ``stop``; a failed poll is logged and tried again."""
        while not stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - the target or Kafka: try again
                logger.warning("poll failed; retrying", extra=log_fields(
                    target=self.name, error=str(exc)))
            stop.wait(interval_s)
