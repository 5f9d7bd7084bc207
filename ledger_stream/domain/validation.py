"""Checks a decoded event must pass before it reaches ``decide``.

An event that fails them is poison: it goes to the DLQ with the reason and an alert, and
changes no key. Pure functions; the reason names the field, never its (possibly sensitive)
value.
"""

from __future__ import annotations

from ledger_stream.domain.events import AttemptClaim, InputEvent, Intent
from ledger_stream.domain.keys import sha256_hex, tenant_of
from ledger_stream.domain.observations import observation_problem

# The longest lease a claim may ask for. A lease covers one call and the report of its
# outcome; a day is far beyond any. Unbounded, a claim asking for 2**63-1 ms made the
# Grant's lease_until overflow Avro's long: the processor crashed on it at every start.
MAX_LEASE_MS = 24 * 3600 * 1000
# A target names the connector that applies the effect (its ``--name``). An intent naming
# none, or a name no connector can have (a line break, a control character), would reserve
# its key and wait for a connector that never comes, until the key is reported stalled.
TARGET_MAX = 255


def invalid_reason(event: InputEvent, message_key: str | None) -> str | None:
    """Why ``event`` (read under ``message_key``) is invalid, or None."""
    key = getattr(event, "key", None)
    if not key:
        return "empty operation key"
    if message_key is not None and message_key != key:
        return "message key differs from the event's operation key"
    if getattr(event, "at_ms", 0) <= 0:
        return "at_ms must be a positive epoch-millisecond time"
    # An intent has no attempt number: a getattr that misses costs the compiled core an
    # AttributeError raised and dropped (half a microsecond per intent).
    attempt = 1 if isinstance(event, Intent) else getattr(event, "attempt", 1)
    if attempt < 1:
        return "attempt numbers start at 1"
    if isinstance(event, Intent):
        return _intent_problem(event)
    if isinstance(event, AttemptClaim) and not 0 < event.lease_ms <= MAX_LEASE_MS:
        return f"lease_ms must be positive and at most {MAX_LEASE_MS} (a day)"
    return None


def _intent_problem(intent: Intent) -> str | None:
    parts = intent.key.split("/")
    if len(parts) < 3 or not all(parts):
        return "the operation key is not tenant/action/business-id"
    if tenant_of(intent.key) != intent.tenant:
        return "the operation key is not scoped by the intent's tenant"
    if parts[1] != intent.action:
        # Approval rules are per action: an intent may not name another action than its
        # key's, or "acme/payout/p1" could pass as an unapproved "note".
        return "the intent's action differs from its operation key's action"
    if not intent.target:
        return "empty target"
    if len(intent.target) > TARGET_MAX or not intent.target.isprintable():
        return f"the target must be at most {TARGET_MAX} printable characters"
    if sha256_hex(intent.args_json) != intent.args_hash:
        return "args_hash is not the SHA-256 of args_json"
    if not intent.event_id:
        return "empty event_id"
    if not intent.workflow.graph or not intent.workflow.version:
        return "workflow graph and version are required"
    return observation_problem(intent.observations)
