"""What operators do to the ledger: decisions on keys waiting for them, guarded."""

from ledger_stream.operate.decisions import Decided, DecisionRefused, record_decision

__all__ = ["DecisionRefused", "Decided", "record_decision"]
