"""The pure core: events, per-key state and the decision table. No I/O, no clock."""

from ledger_stream.domain.deadlines import due_ms
from ledger_stream.domain.decide import Decision, decide, receipt_for
from ledger_stream.domain.keys import args_hash, canonical_json, operation_key
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, Phase, absent

__all__ = [
    "Decision",
    "KeyState",
    "Phase",
    "Policy",
    "absent",
    "args_hash",
    "canonical_json",
    "decide",
    "due_ms",
    "operation_key",
    "receipt_for",
]
