"""A key's history across the ledger topics: its timeline (``ledger-stream inspect``) and
the redacted evidence file of an incident review (``ledger-stream evidence``)."""

from ledger_stream.history.evidence import evidence, redacted
from ledger_stream.history.reader import ROLES, read_key
from ledger_stream.history.timeline import Located, TimelineRow, timeline

__all__ = ["ROLES", "Located", "TimelineRow", "evidence", "read_key", "redacted", "timeline"]
