"""The effects an MCP server offers: registered by the server's operator, never by the model.

Each effect has a name the host's model uses (``refund``), the ledger action it becomes
(``refund``), the connector target that applies it (``payments``) and, in brackets, the
argument fields whose values name the business object: the operation key is
``tenant/action/<value>[/<value>...]``, derived by the server from the call's arguments.
Written ``NAME=ACTION@TARGET[FIELD,...]``; several effects are separated by commas::

    refund=refund@payments[invoice],ship=ship@warehouse[order,line]

The key rule: a key comes only from business identity. A model-written id is not one (a
regenerated answer writes another, and the same refund is paid twice), so taking the
model's ``operation_id`` as the key needs an explicit, per-effect opt-in, the reserved field
``unsafe-model-id``::

    note=add_note@crm[unsafe-model-id]

A registration without brackets (the older ``NAME=ACTION@TARGET``) is refused with the
reason: it names no business id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger_stream.domain.keys import InvalidKeyError, business_id_part, operation_key

SYNTAX = "NAME=ACTION@TARGET[FIELD,...] (e.g. refund=refund@payments[invoice])"
MODEL_ID = "unsafe-model-id"  # the opt-in: the key is the model's operation_id text
FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# One registration: NAME=ACTION@TARGET, an optional [FIELD,...], then a comma or the end;
# the brackets are matched whole, so the commas between key fields split nothing.
ITEM = re.compile(r"\s*([^,\[\]]*?)\s*(?:\[([^\]]*)\])?\s*(?:,|$)")


class EffectSpecError(ValueError):
    """An effect registration that cannot be read; the message says which and why."""


@dataclass(frozen=True)
class RegisteredEffect:
    """One effect offered to the model. ``key_fields`` name the arguments the key is made
    of (in order); ``model_id`` is the unsafe opt-in to the model's ``operation_id``."""

    name: str
    action: str
    target: str
    key_fields: tuple[str, ...] = ()
    model_id: bool = False

    def key(self, tenant: str, arguments: Mapping[str, Any],
            operation_id: str | None = None) -> str:
        """The operation key of a call; InvalidKeyError says what is missing or unusable
        (a key field absent, empty, or neither text nor an integer). An ``operation_id``
        sent to an effect keyed by its arguments is ignored, as the tool's schema ignores it
        when no effect takes one: a model-written id never chooses the key."""
        if self.model_id:
            if not (operation_id or "").strip():
                raise InvalidKeyError(f"effect {self.name!r} takes its key from operation_id: "
                                      "give a stable business id")
            return operation_key(tenant, self.action, business_id_part(operation_id))
        return operation_key(tenant, self.action, *(self._part(arguments, f)
                                                    for f in self.key_fields))

    def _part(self, arguments: Mapping[str, Any], field: str) -> str:
        try:  # text or an integer; floats, booleans and objects are refused
            part = business_id_part(arguments.get(field))
        except InvalidKeyError:
            part = ""
        if not part:
            raise InvalidKeyError(f"effect {self.name!r} needs the argument {field!r} (the "
                                  "business id its key is made of) as text or an integer")
        return part

    def business_id(self, key: str) -> dict[str, str]:
        """The key fields' values in ``key`` (``{}`` when its shape is another effect's)."""
        parts = key.split("/")[2:]
        fields = ("operation_id",) if self.model_id else self.key_fields
        return dict(zip(fields, parts, strict=True)) if len(parts) == len(fields) else {}


def parse_effects(text: str) -> dict[str, RegisteredEffect]:
    """``NAME=ACTION@TARGET[FIELD,...][,...]`` into effects by name; EffectSpecError when
    malformed or when an effect names no business id."""
    found: dict[str, RegisteredEffect] = {}
    for head, fields in _items(text):
        effect = _effect(head, fields)
        if effect.name in found:
            raise EffectSpecError(f"effect {effect.name!r} is registered twice")
        shared = next((e.name for e in found.values() if e.action == effect.action), None)
        if shared is not None:
            raise EffectSpecError(f"effects {shared!r} and {effect.name!r} share the action "
                                  f"{effect.action!r}: their operations would share keys")
        found[effect.name] = effect
    if not found:
        raise EffectSpecError(f"no effects registered: give at least one {SYNTAX}")
    return found


def _items(text: str) -> list[tuple[str, str | None]]:
    """(``NAME=ACTION@TARGET``, bracket text or None) per registration."""
    items, at = [], 0
    while at < len(text):
        match = ITEM.match(text, at)
        if match is None or match.end() == at:
            raise EffectSpecError(f"cannot read the effects from {text[at:]!r}: write {SYNTAX}")
        head, fields = match.group(1), match.group(2)
        if head or fields is not None:
            items.append((head, fields))
        at = match.end()
    return items


def _effect(head: str, fields: str | None) -> RegisteredEffect:
    name, eq, rest = head.partition("=")
    action, at, target = rest.partition("@")
    name, action, target = name.strip(), action.strip(), target.strip()
    if not (eq and at and name and action and target):
        raise EffectSpecError(f"effect {head!r} is not {SYNTAX}")
    try:
        operation_key("tenant", action, "id")
    except InvalidKeyError as exc:
        raise EffectSpecError(f"effect {name!r}: bad action {action!r}: {exc}") from exc
    names = [f.strip() for f in (fields or "").split(",") if f.strip()]
    if not names:
        raise EffectSpecError(
            f"effect {name!r} names no business id: write {name}={action}@{target}[FIELD,...] "
            f"with the argument(s) that identify the business object (e.g. [invoice]); the "
            f"key is derived from their values. {name}={action}@{target}[{MODEL_ID}] takes "
            "the model's operation_id instead, which is unsafe: a regenerated answer writes "
            "another id, and the effect happens twice")
    if MODEL_ID in names:
        if len(names) > 1:
            raise EffectSpecError(f"effect {name!r}: {MODEL_ID} stands alone (the key is the "
                                  "model's operation_id, not argument fields)")
        return RegisteredEffect(name, action, target, model_id=True)
    bad = [f for f in names if not FIELD.fullmatch(f)]
    if bad or len(set(names)) < len(names):
        raise EffectSpecError(f"effect {name!r}: key fields must be distinct argument names "
                              f"(letters, digits, _ and -), not {', '.join(bad or names)}")
    return RegisteredEffect(name, action, target, key_fields=tuple(names))
