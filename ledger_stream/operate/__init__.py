"""What operators do to the ledger: decisions on keys waiting for them, guarded, each one
audited first."""

from ledger_stream.operate.audit import Actor, AuditNotWritten
from ledger_stream.operate.decisions import Decided, DecisionRefused, record_decision

__all__ = ["Actor", "AuditNotWritten", "DecisionRefused", "Decided", "record_decision"]
