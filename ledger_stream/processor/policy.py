"""The decision policy from settings: the knobs of the decision table, and the approver public
keys the ledger trusts, which must be given explicitly outside development mode."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import fields, replace
from enum import Enum

from ledger_stream.config import Settings
from ledger_stream.domain.approval import ApprovalKeys, InvalidApprovalKey
from ledger_stream.domain.policy import ActionRules, LookupRetry, Policy
from ledger_stream.logs import log_fields
from ledger_stream.operate.approvals import public_keys_from_text, public_keys_in
from ledger_stream.processor import metrics
from ledger_stream.serde import AvroCodec
from ledger_stream.settings.policy import ACTION_TYPE, ACTION_TYPE_RULE, check_required_actions

logger = logging.getLogger(__name__)

DEV_APPROVAL_SECRET = b"ledger-dev-secret"
KEY_SETTINGS = "LEDGER_APPROVAL_KEYS_DIR (a directory of KEY_ID.pub files) or " \
    "LEDGER_APPROVAL_PUBLIC_KEYS (KEY_ID=BASE64,...)"


class ConfigError(ValueError):
    """A setting that makes the ledger unsafe to run: the message says which and why."""


def approval_keys(settings: Settings) -> ApprovalKeys:
    """The approver public keys (by key id), the revoked ids and, in dev mode only, the
    shared HMAC secret. Raises ConfigError outside dev mode when no public key is given:
    the ledger holds nothing that can sign an approval, so a host with its whole
    configuration cannot approve its own payment."""
    try:
        public = public_keys_in(settings.policy.keys_dir) \
            if settings.policy.keys_dir is not None else {}
        public.update(public_keys_from_text(settings.policy.public_keys or ""))
        keys = ApprovalKeys.of(public, frozenset(settings.policy.revoked_keys),
                               dev_secret(settings, approver_keys=bool(public)))
    except InvalidApprovalKey as exc:
        raise ConfigError(str(exc)) from None
    if not settings.policy.dev_mode and not keys.public:
        secret_only = " (LEDGER_APPROVAL_SECRET is honoured in development mode only: " \
            "whoever can check a shared secret can also sign with it)" \
            if settings.policy.secret is not None \
            and settings.policy.secret.get_secret_value() else ""
        raise ConfigError(
            f"no approver public key: set {KEY_SETTINGS}; make a key with `ledger-stream "
            f"approval-keys generate`{secret_only}; or LEDGER_DEV_MODE=1 for development")
    if settings.policy.signing_key is not None and not settings.policy.dev_mode:
        logger.warning("LEDGER_APPROVAL_SIGNING_KEY is set here, but checking approvals needs "
                       "public keys only: keep approvers' private keys off this host")
    return keys


def dev_secret(settings: Settings, approver_keys: bool = False) -> bytes | None:
    """The HMAC secret of key-less approvals: only in dev mode (LEDGER_APPROVAL_SECRET, or
    the public development secret when no approver key is given); None otherwise, whatever
    is configured."""
    configured = settings.policy.secret.get_secret_value().encode() \
        if settings.policy.secret is not None else b""
    if not settings.policy.dev_mode:
        if configured:
            logger.warning("LEDGER_APPROVAL_SECRET is ignored outside development mode: "
                           "approvals need an approver key's signature")
        return None
    if configured:
        return configured
    if approver_keys:
        # Keys given say approvals matter here: a secret anyone can read in the source
        # would let any worker approve its own payment.
        return None
    logger.warning("development mode: approvals without a key id use the public "
                   "development secret")
    return DEV_APPROVAL_SECRET


def policy_from(settings: Settings) -> Policy:
    """The decision policy ``settings`` give, named by its revision. Raises ConfigError for
    a per-action rule the ledger cannot honour, or a required action no intent can name
    (refused at load too; here for settings built without validation)."""
    try:
        check_required_actions(settings.policy.required_actions)
    except ValueError as exc:
        raise ConfigError(f"LEDGER_APPROVAL_REQUIRED_ACTIONS: {exc}") from None
    policy = Policy(
        replay_window_ms=settings.topics.replay_window_ms,
        approval_keys=approval_keys(settings),
        approval_required_actions=frozenset(settings.policy.required_actions),
        retry_backoff_ms=settings.processor.retry_backoff_ms,
        max_attempts=settings.processor.max_attempts,
        clock_skew_ms=settings.processor.clock_skew_ms,
        stall_after_ms=settings.processor.stall_after_ms,
        reconcile_timeout_ms=settings.processor.reconcile_timeout_ms,
        lag_credit_ms=settings.processor.lag_credit_ms,
        pregrant_lease_ms=settings.processor.pregrant_lease_ms,
        actions=action_rules(settings),
    )
    policy = under_guarantee(policy, settings.processor.processing_guarantee)
    check_pregrant(policy)
    return replace(policy, revision=policy_revision(policy))


def check_pregrant(policy: Policy) -> None:
    """Raise ConfigError for a pre-grant that does not end, skew margin included, before
    the stall timer of its dispatch falls (``pregrant_lease_ms`` < ``stall_after_ms`` -
    ``clock_skew_ms``). No timer acts inside a pre-grant whatever the settings: while one is
    on record the key's deadline is its end plus the skew margin, where a plain copy of the
    Dispatch is offered and the stall timer counts from (deadlines.py). This keeps
    ``stalled`` meaning a copy nobody claimed for ``stall_after``: counted from the
    Dispatch instead (a copy whose send time is not known), a shorter stall margin would
    alert as the copy is offered, for a key whose fencer may have called until then."""
    lease, stall, skew = policy.pregrant_lease_ms, policy.stall_after_ms, policy.clock_skew_ms
    if lease and lease >= stall - skew:
        raise ConfigError(
            f"LEDGER_PREGRANT_LEASE_MS ({lease}) must be shorter than LEDGER_STALL_AFTER_MS "
            f"({stall}) less LEDGER_CLOCK_SKEW_MS ({skew}): the stall timer of a fresh "
            "key's dispatch would fall before its pre-grant's end plus the skew margin, "
            "where the dispatch is offered again; shorten the pre-grant, lengthen "
            "stall_after, or set the pre-grant to 0")


def under_guarantee(policy: Policy, guarantee: str, codec: AvroCodec | None = None) -> Policy:
    """``policy`` as a processor with ``guarantee`` may decide under it: the pre-grant only
    exactly once. At least once, a batch decided again after a crash writes its Dispatch a
    second time, and two records of one pre-grant could be fenced by two connectors.

    Nor when ``codec`` writes a Dispatch schema without ``lease_until_ms`` (an older
    release's, ``LEDGER_WRITE_SCHEMAS``: the first pass of an upgrade): no connector would
    see the pre-grant, and every first claim would be held until its end for nothing."""
    carried = codec is None or "lease_until_ms" in codec.schemas.writer("Dispatch").fields
    if policy.pregrant_lease_ms == 0 or (guarantee == "exactly-once" and carried):
        return policy
    off = replace(policy, pregrant_lease_ms=0)
    return replace(off, revision=policy_revision(off)) if policy.revision else off




def action_rules(settings: Settings) -> dict[str, ActionRules]:
    """Each action's rules from ``settings.policy.actions``. Raises ConfigError, naming the
    action and the knob, for a rule that would be silently weaker than it reads: a replay
    window longer than the history topics keep, or ``approval = false`` for an action the
    ledger-wide list requires approval for."""
    rules: dict[str, ActionRules] = {}
    window = settings.topics.replay_window_ms
    for action, given in settings.policy.actions.items():
        where = f"actions.{action}"
        if not ACTION_TYPE.fullmatch(action):  # refused at load too; here for settings
            raise ConfigError(f"{where}: {ACTION_TYPE_RULE}")  # built without validation
        if given.replay_window_ms is not None and given.replay_window_ms > window:
            raise ConfigError(
                f"{where}.replay_window_ms = {given.replay_window_ms} is longer than "
                f"LEDGER_REPLAY_WINDOW_MS ({window}): the history topics keep a key's records "
                "for that long only, so a replay after it could repeat the effect")
        if "approval" in given.model_fields_set and not given.approval \
                and action in settings.policy.required_actions:
            raise ConfigError(
                f"{where}.approval = false, but LEDGER_APPROVAL_REQUIRED_ACTIONS lists "
                f"{action}: a per-action rule never lifts a required approval")
        rules[action] = ActionRules(
            replay_window_ms=given.replay_window_ms, max_attempts=given.max_attempts,
            retry_after_lookup=LookupRetry(given.retry_after_lookup),
            approval=given.approval, reversible=given.reversible)
    return rules


# Policy fields that name or authenticate, not decide: the keys can rotate without a new
# revision (approvals carry their own key id), and the revision cannot digest itself.
NOT_KNOBS = frozenset({"approval_keys", "revision"})


def policy_knobs(policy: Policy) -> dict[str, object]:
    """Every knob of ``policy`` that decides an action's fate, as plain JSON values: each
    field of Policy but :data:`NOT_KNOBS`, each action's rules field by field. Read from
    the dataclass fields, so a knob added to Policy or ActionRules is in it at once."""
    knobs: dict[str, object] = {}
    for knob in fields(policy):
        if knob.name in NOT_KNOBS:
            continue
        value = getattr(policy, knob.name)
        if knob.name == "actions":
            value = {action: {f.name: _plain(getattr(r, f.name)) for f in fields(r)}
                     for action, r in sorted(value.items())}
        knobs[knob.name] = _plain(value)
    # Which approvals count is a knob too, though the keys themselves are not: a revoked
    # key id refuses its approvals, and development mode accepts HMAC ones. Named only when
    # set (a policy without either keeps its revision); never the secret, only its use.
    keys = policy.approval_keys
    if keys.revoked or keys.dev_secret is not None:
        knobs["approvals"] = {"revoked": sorted(keys.revoked),
                              "dev_mode": keys.dev_secret is not None}
    return knobs


def _plain(value: object) -> object:
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, Enum):
        return value.value
    return value


def policy_revision(policy: Policy) -> str:
    """A short digest of every knob that decides an action's fate (:func:`policy_knobs`:
    the approver keys and any secret aside, the revoked key ids and development mode in):
    two processors with the same revision decide every action alike, and a changed knob
    changes it. Receipts an action's rule decided name it."""
    text = json.dumps(policy_knobs(policy), sort_keys=True, separators=(",", ":"))
    return "p-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def describe(policy: Policy) -> str:
    """One line per action with rules, for the start log: what each action gets."""
    lines = [f"decision policy {policy.revision}: max_attempts {policy.max_attempts}, "
             f"replay window {policy.replay_window_ms} ms, approval for "
             f"{sorted(policy.approval_required_actions) or 'no action'}, pre-grant "
             f"{f'{policy.pregrant_lease_ms} ms' if policy.pregrant_lease_ms else 'off'}"]
    for action, r in sorted(policy.actions.items()):
        lines.append(
            f"  {action}: max_attempts {policy.max_attempts_for(action)}, replay window "
            f"{policy.replay_window_for(action)} ms, retry after lookup "
            f"{r.retry_after_lookup.value}, approval "
            f"{'yes' if policy.requires_approval(action) else 'no'}, "
            f"{'reversible' if r.reversible else 'irreversible'}")
    return "\n".join(lines)


def announce(policy: Policy) -> None:
    """Say which policy this processor decides under: the start log (each action's rules)
    and ``ledger_decision_policy_info{revision}``."""
    logger.info(describe(policy), extra=log_fields(policy_revision=policy.revision))
    metrics.POLICY_INFO.labels(policy.revision).set(1)
