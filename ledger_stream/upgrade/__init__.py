"""``ledger-stream upgrade-check``: before a new version of an agent graph is deployed,
resume its in-flight threads against the new code in a dry run and compare what it would
submit with what the ledger holds (check.py, verdict.py)."""

from ledger_stream.upgrade.check import LedgerProbe, check_threads
from ledger_stream.upgrade.ledger import KafkaLedger, Ledger
from ledger_stream.upgrade.verdict import UNSAFE, Finding, Kind, ThreadVerdict

__all__ = ["UNSAFE", "Finding", "KafkaLedger", "Kind", "Ledger", "LedgerProbe",
           "ThreadVerdict", "check_threads"]
