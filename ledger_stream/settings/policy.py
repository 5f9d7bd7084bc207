"""The approval and action policy: which actions need an approval, whose signature counts,
and each action's own replay window, attempts and retry after a lookup."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ledger_stream.domain.approval import KEY_ID
from ledger_stream.settings.group import MAX_ATTEMPTS, MAX_MS, SettingsGroup, flat_config

# An action type as operation keys spell it (tenant/ACTION/business-id, domain/keys.py):
# one key segment (no '/', line break or NUL), 1 to 200 characters, and here no space at
# either end: "refund " is a typo of "refund" that no intent names, and a rule kept for it
# would require nothing of refund. A space inside ("wire transfer") is a name keys allow.
ACTION_TYPE = re.compile(r"[^/\s\x00](?:[^/\n\r\x00]{0,198}[^/\s\x00])?")
ACTION_TYPE_RULE = ("an action type is one operation-key segment: 1 to 200 characters, no "
                    "'/' or line break, no space at either end")
# An entry of the list of actions that need approval: an action type with no comma as well,
# for "refund,email" is a list written as one name, which would require nothing of either
# (an action whose name holds a comma takes its approval from its [actions.X] table).
REQUIRED_ACTION = re.compile(r"(?!.*,)" + ACTION_TYPE.pattern)
REQUIRED_ACTION_RULE = (ACTION_TYPE_RULE + ", no ',' (one action per entry; an action "
                        "named with a comma takes `approval = true` in its [actions] table)")


def check_required_actions(actions: object) -> tuple[str, ...]:
    """``actions`` as a tuple if it is a list, tuple or set of strings and every entry is an
    action type an intent can carry (REQUIRED_ACTION); ValueError naming the wrong entries
    by position otherwise (a set's in sorted order). The one rule of the list of actions
    that need approval: applied at load (PolicySettings) and again by the processor at
    start (processor/policy.py), for settings built without validation (``model_copy``),
    where ``["refund "]`` would require approval of no action, and not of ``refund``, and a
    plain ``"refund"`` would require it of the actions named r, e, f, u, n and d."""
    if not isinstance(actions, list | tuple | set | frozenset):
        raise ValueError(f"must be a list of action types, not a {type(actions).__name__}")
    wrong = [str(n) for n, entry in enumerate(actions, 1) if not isinstance(entry, str)]
    if wrong:
        raise ValueError(f"entr{'ies' if len(wrong) > 1 else 'y'} {', '.join(wrong)}: not "
                         "a string (an action type)")
    entries = tuple(sorted(actions) if isinstance(actions, set | frozenset) else actions)
    _refused_entries(entries, REQUIRED_ACTION, REQUIRED_ACTION_RULE)
    return entries


def _refused_entries(entries: tuple[str, ...], rule: re.Pattern[str], what: str) -> None:
    """ValueError naming (by position, never by value) each entry ``rule`` does not match:
    an entry no intent or approval can carry would otherwise be kept and match nothing."""
    wrong = [str(n) for n, entry in enumerate(entries, 1) if not rule.fullmatch(entry)]
    if wrong:
        raise ValueError(f"entr{'ies' if len(wrong) > 1 else 'y'} {', '.join(wrong)}: {what}")


class ActionPolicySettings(BaseModel):
    """One action's policy (the file's ``[actions.ACTION]`` table). Every knob left out
    takes the ledger-wide value or the safe default: no retry that a target would not
    refuse, no approval lifted, effects irreversible."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    replay_window_ms: int | None = Field(
        None, ge=1, le=MAX_MS,
        description="how long a finished key of this action stays authoritative "
        "(default: LEDGER_REPLAY_WINDOW_MS; never longer)")
    max_attempts: int | None = Field(
        None, ge=1, le=MAX_ATTEMPTS,
        description="attempts before a retryable failure is final, counting "
        "attempts with an unknown outcome (default: LEDGER_MAX_ATTEMPTS)")
    retry_after_lookup: Literal["never", "deduplicating", "always"] = Field(
        "deduplicating", description="after an unknown outcome whose lookup found nothing: "
        "never (an operator decides), deduplicating (a new attempt only at a target that "
        "refuses a second effect per key), always (also at one that does not; needs "
        "reversible = true)")
    approval: bool = Field(
        False, description="needs a valid approval (adds to LEDGER_APPROVAL_REQUIRED_ACTIONS)")
    reversible: bool = Field(
        False, description="a duplicate of this effect can be undone (a row that can be "
        "deleted; not a payout or an email)")

    @model_validator(mode="after")
    def _always_needs_reversible(self) -> Self:
        if self.retry_after_lookup == "always" and not self.reversible:
            raise ValueError(
                "retry_after_lookup = \"always\" needs reversible = true: a lookup that "
                "missed an effect then duplicates it at a target that does not refuse "
                "duplicates, which only an action whose effect can be undone may accept")
        return self


class PolicySettings(SettingsGroup):
    """Approver keys the ledger trusts and the actions that need them (flat names
    ``approval_*``, and ``dev_mode``), and the per-action policy (``actions``)."""

    model_config = flat_config("approval_", dev_mode="dev_mode", actions="actions")

    dev_mode: bool = Field(
        False, description="development mode: approvals may also be signed with the "
        "shared HMAC secret (LEDGER_APPROVAL_SECRET, or a built-in public one)")
    secret: SecretStr | None = Field(
        None, description="development mode only: the shared HMAC key of approvals without "
        "a key id (ignored outside dev_mode, where approver keys sign)"
    )
    keys_dir: Path | None = Field(
        None, description="directory of the approver public keys the ledger trusts, one "
        "KEY_ID.pub file each (PEM, as `ledger-stream approval-keys generate` writes)")
    public_keys: str | None = Field(
        None, description="more trusted approver public keys, KEY_ID=BASE64[,KEY_ID=BASE64...] "
        "(the raw 32-byte Ed25519 key, base64)")
    revoked_keys: tuple[str, ...] = Field(
        (), description="approver key ids whose approvals are refused, even when still listed")
    signing_key: Path | None = Field(
        None, description="an approver's private key file (`approve`, the gateway's approval "
        "route); never needed by the processor")
    required_actions: tuple[str, ...] = Field(
        (), description="action types that need a valid approval"
    )
    actions: dict[str, ActionPolicySettings] = Field(
        default_factory=dict, description="each action type's own policy, by action type "
        "(the file's [actions.ACTION] tables; the processor's --action-policy flags)")

    @field_validator("required_actions")
    @classmethod
    def _action_types(cls, actions: tuple[str, ...]) -> tuple[str, ...]:
        """Refused at load: ``["refund "]`` kept as is required approval of no action."""
        return check_required_actions(actions)

    @field_validator("revoked_keys")
    @classmethod
    def _key_ids(cls, key_ids: tuple[str, ...]) -> tuple[str, ...]:
        """Refused at load, not first when the processor builds its approval keys."""
        _refused_entries(key_ids, KEY_ID, "an approval key id is 1 to 64 letters, digits, "
                         "'.', '_' or '-', starting with a letter or digit")
        return key_ids

    @field_validator("actions")
    @classmethod
    def _action_keys(cls, actions: dict[str, ActionPolicySettings]
                     ) -> dict[str, ActionPolicySettings]:
        """A rule under a name no intent carries would be a rule for no action."""
        wrong = [repr(action) for action in actions if not ACTION_TYPE.fullmatch(action)]
        if wrong:
            raise ValueError(f"{', '.join(wrong)}: {ACTION_TYPE_RULE}")
        return actions
