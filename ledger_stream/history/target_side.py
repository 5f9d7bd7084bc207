"""The target side of a key's evidence: the target's own record of the effect, asked by key
with the connector's lookup at the time the evidence is written, set beside the receipt
id the ledger recorded.

Answers: ``found`` (the target's receipt id for the key), ``absent`` (the target is sure
there is none), ``cannot be queried`` (the target has no lookup, or it failed: said plainly,
with the connector's own redacted reason), ``not asked`` (no target given). ``agrees`` says
whether the target's receipt id is the one the ledger's receipts name; an effect found for
a key the ledger ended without one (``failed``, ``rejected``) disagrees; None when there is
nothing to compare yet (no id on the ledger's side, the key not ended so). The lookup never
applies anything.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from ledger_stream.connector.redaction import summary
from ledger_stream.connector.target import Target

CANNOT = "cannot be queried"
# Key states in which the ledger says the key has no effect: one found at the target disagrees.
ENDED_WITHOUT_EFFECT = frozenset({"failed", "rejected"})


def ledger_receipt_ids(receipts: Iterable[Mapping[str, Any]]) -> list[str]:
    """The target receipt ids the ledger's receipts record (from the evidence document)."""
    ids: list[str] = []
    for receipt in receipts:
        external = receipt.get("external_id")
        if external and external not in ids:
            ids.append(str(external))
    return ids


def target_side(target: Target | None, key: str, ledger_ids: list[str],
                timeout_s: float = 10.0, ledger_state: str | None = None) -> dict[str, Any]:
    """What ``target`` says of ``key`` now (module doc); ``ledger_state``: the key's state
    in the ledger (the evidence's ``state``)."""
    side: dict[str, Any] = {"target": target.name if target is not None else None,
                            "ledger_receipt_ids": ledger_ids, "receipt_id": None,
                            "agrees": None}
    if target is None:
        return {**side, "answer": "not asked",
                "why": "no --target given: the target's record was not looked up"}
    side["asked_at_ms"] = int(time.time() * 1000)
    if not target.queryable:
        return {**side, "answer": CANNOT, "why": "the target has no lookup by key"}
    try:
        found = target.lookup(key, timeout_s)
    except Exception as exc:  # LookupUnavailable, or a failure the Target let through:
        return {**side, "answer": CANNOT, "why": summary(exc)}  # summary() shows no text
    if found is None:
        return {**side, "answer": "absent", "agrees": not ledger_ids,
                "why": "the target is sure it holds no effect for the key"}
    agrees = found in ledger_ids if ledger_ids else \
        (False if ledger_state in ENDED_WITHOUT_EFFECT else None)
    return {**side, "answer": "found", "receipt_id": found, "agrees": agrees}
