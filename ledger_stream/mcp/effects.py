"""The effects an MCP server offers: registered by the server's operator, never by the model.

Each effect has a name the host's model uses (``refund``), the ledger action it becomes
(``refund``) and the connector target that applies it (``payments``), written
``NAME=ACTION@TARGET``; several are separated by commas::

    refund=refund@payments,welcome-mail=send_email@smtp
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger_stream.domain.keys import InvalidKeyError, operation_key


class EffectSpecError(ValueError):
    """An effect registration that cannot be read; the message says which and why."""


@dataclass(frozen=True)
class RegisteredEffect:
    name: str
    action: str
    target: str

    def key(self, tenant: str, operation_id: str) -> str:
        """The operation key of ``operation_id`` (InvalidKeyError for an unusable id)."""
        return operation_key(tenant, self.action, operation_id.strip())


def parse_effects(text: str) -> dict[str, RegisteredEffect]:
    """``NAME=ACTION@TARGET[,...]`` into effects by name; EffectSpecError when malformed."""
    found: dict[str, RegisteredEffect] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, eq, rest = item.partition("=")
        action, at, target = rest.partition("@")
        name, action, target = name.strip(), action.strip(), target.strip()
        if not (eq and at and name and action and target):
            raise EffectSpecError(f"effect {item!r} is not NAME=ACTION@TARGET "
                                  "(e.g. refund=refund@payments)")
        if name in found:
            raise EffectSpecError(f"effect {name!r} is registered twice")
        shared = next((e.name for e in found.values() if e.action == action), None)
        if shared is not None:
            raise EffectSpecError(f"effects {shared!r} and {name!r} share the action "
                                  f"{action!r}: their operations would share keys")
        try:
            operation_key("tenant", action, "id")
        except InvalidKeyError as exc:
            raise EffectSpecError(f"effect {name!r}: bad action {action!r}: {exc}") from exc
        found[name] = RegisteredEffect(name, action, target)
    if not found:
        raise EffectSpecError("no effects registered: give at least one NAME=ACTION@TARGET")
    return found
