"""The decision policy from settings: the knobs of the decision table, and the approval
secret, which must be set explicitly outside development mode."""

from __future__ import annotations

import logging

from ledger_stream.config import Settings
from ledger_stream.domain.policy import Policy

logger = logging.getLogger(__name__)

DEV_APPROVAL_SECRET = b"ledger-dev-secret"


class ConfigError(ValueError):
    """A setting that makes the ledger unsafe to run: the message says which and why."""


def approval_secret(settings: Settings) -> bytes:
    """The approval HMAC key. Raises ConfigError when none is set outside dev mode: a
    well-known default would let anyone sign approvals."""
    if settings.approval_secret is not None:
        secret = settings.approval_secret.get_secret_value().encode()
        if secret:
            return secret
    if not settings.dev_mode:
        raise ConfigError(
            "no approval secret: set LEDGER_APPROVAL_SECRET (or approval_secret in the "
            "config file), or LEDGER_DEV_MODE=1 to use the public development secret")
    logger.warning("development mode: approvals use the public development secret")
    return DEV_APPROVAL_SECRET


def policy_from(settings: Settings) -> Policy:
    return Policy(
        replay_window_ms=settings.replay_window_ms,
        approval_secret=approval_secret(settings),
        approval_required_actions=frozenset(settings.approval_required_actions),
        retry_backoff_ms=settings.retry_backoff_ms,
        max_attempts=settings.max_attempts,
        clock_skew_ms=settings.clock_skew_ms,
        stall_after_ms=settings.stall_after_ms,
        reconcile_timeout_ms=settings.reconcile_timeout_ms,
    )
