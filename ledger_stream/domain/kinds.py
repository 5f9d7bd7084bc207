"""The enumerations the ledger's events carry: outcomes, receipt statuses, answers, reasons,
alert kinds, freeze modes and audit actions. Their values are the Avro enum symbols."""

from __future__ import annotations

from enum import StrEnum


class Origin(StrEnum):
    """Why a worker produced this intent; informational, never changes a decision."""

    FRESH = "fresh"
    RESUME = "resume"
    REPLAY = "replay"
    FORK = "fork"
    OPERATOR = "operator"


class OutcomeStatus(StrEnum):
    SUCCEEDED = "succeeded"
    NOT_APPLIED = "not_applied"  # failed, definitely not applied, retryable
    FAILED = "failed"  # failed, permanent
    UNKNOWN = "unknown"  # timeout or dropped connection after the request was sent
    # The claimant did not call the target and never will for this claim: its grant came
    # after the lease could cover the call, or it gave the claim up (revocation, shutdown).
    # The attempt moves on without counting against max_attempts.
    NOT_CALLED = "not_called"


class ReconcileStatus(StrEnum):
    FOUND = "found"
    NOT_FOUND = "not_found"
    UNQUERYABLE = "unqueryable"


class Resolution(StrEnum):
    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    FAILED = "failed"


class ReceiptStatus(StrEnum):
    ACCEPTED = "accepted"  # reserved, waiting for a connector
    IN_PROGRESS = "in_progress"  # granted to a connector
    RECONCILING = "reconciling"  # outcome unknown, target being queried
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    HELD = "held"
    NEEDS_RECONCILIATION = "needs_reconciliation"


TERMINAL_RECEIPTS = frozenset(
    {
        ReceiptStatus.SUCCEEDED,
        ReceiptStatus.FAILED,
        ReceiptStatus.REJECTED,
        ReceiptStatus.HELD,
        ReceiptStatus.NEEDS_RECONCILIATION,
    }
)


class Answer(StrEnum):
    """What one request (one intent) got, beside the key's state: the distinction a
    caller acts on, a graph on replay above all."""

    CREATED = "created"  # this intent holds the key: its effect (state: succeeded or failed)
    ALREADY_DONE = "already_done"  # another, earlier intent's effect: the original outcome
    REJECTED = "rejected"  # refused (reason: conflict, approval, expired_key, ...): no effect
    HELD = "held"  # held (reason: frozen, or version): applied after a release, if ever
    PENDING = "pending"  # no outcome yet (in flight, or waiting for an operator): ask again


class Reason(StrEnum):
    NONE = "none"
    CONFLICT = "conflict"
    APPROVAL = "approval"
    EXPIRED_KEY = "expired_key"
    VERSION = "version"
    MAX_ATTEMPTS = "max_attempts"
    TARGET_REJECTED = "target_rejected"
    OPERATOR = "operator"
    FROZEN = "frozen"  # the action is frozen (containment): recorded, not dispatched


class AlertKind(StrEnum):
    CONFLICTING_ARGUMENTS = "conflicting_arguments"
    DUPLICATE_EFFECT = "duplicate_effect"
    EFFECT_WITHOUT_INTENT = "effect_without_intent"
    APPROVAL_MISMATCH = "approval_mismatch"
    EXPIRED_KEY_REUSE = "expired_key_reuse"
    RECONCILIATION_REQUIRED = "reconciliation_required"
    VERSION_MISMATCH = "version_mismatch"
    POISON_INPUT = "poison_input"
    STALLED = "stalled"  # a key made no progress for longer than the policy allows
    LATE_EFFECT = "late_effect"  # an effect reported for a key already answered "failed"


# --- inputs -------------------------------------------------------------------------------


class FreezeMode(StrEnum):
    HOLD = "hold"  # record new work, dispatch nothing until the unfreeze
    APPROVAL = "approval"  # new intents of the action need a valid approval


class AuditAction(StrEnum):
    DECISION = "decision"  # an operator's decision on a key waiting for one
    FREEZE = "freeze"
    UNFREEZE = "unfreeze"
    APPROVAL = "approval"  # an approval issued for a key
