"""The public testing kit, used as a user would: a small connector written outside the
package is proven with the kit's Target contract, and the in-memory ledger decides with
the real decision core."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from ledger_stream.connector.target import (
    EffectRequest,
    LookupUnavailable,
    Target,
    TargetError,
)
from ledger_stream.domain.containment import Freeze, Hold
from ledger_stream.domain.events import (
    FreezeMode,
    OutcomeStatus,
    Receipt,
    ReceiptStatus,
    Workflow,
)
from ledger_stream.sdk import ConflictError, InvalidIntentError
from ledger_stream.testing import (
    DeduplicatingTargetContract,
    InMemoryLedger,
    MemoryTarget,
    PartitionStoreContract,
)

pytestmark = pytest.mark.timeout(30)


class GuestbookUnreachable(TargetError):
    """The guestbook's database could not be opened: nothing was written."""


class GuestbookRefused(TargetError):
    """The key was used before with other arguments."""


class Guestbook(Target):
    """A user's connector: signs a guestbook kept in SQLite, one entry per key (its own
    UNIQUE constraint deduplicates)."""

    name = "guestbook"
    deduplicates = True

    def __init__(self, path: Path) -> None:
        self.path = path

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=rwc", uri=True, timeout=2)
            db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, "
                       "args_hash TEXT NOT NULL, id INTEGER NOT NULL)")
        except sqlite3.OperationalError as exc:
            raise GuestbookUnreachable("the guestbook database cannot be opened") from exc
        return db

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        with self._open() as db:
            found = db.execute("SELECT args_hash, id FROM entries WHERE key = ?",
                               (request.key,)).fetchone()
            if found is not None:
                if found[0] != request.args_hash:
                    raise GuestbookRefused("key reused with other arguments")
                return f"entry-{found[1]}"
            (count,) = db.execute("SELECT count(*) FROM entries").fetchone()
            db.execute("INSERT INTO entries VALUES (?, ?, ?)",
                       (request.key, request.args_hash, count + 1))
            return f"entry-{count + 1}"

    def classify(self, error: Exception) -> OutcomeStatus:
        if isinstance(error, GuestbookUnreachable):
            return OutcomeStatus.NOT_APPLIED
        if isinstance(error, GuestbookRefused):
            return OutcomeStatus.FAILED
        return OutcomeStatus.UNKNOWN

    def lookup(self, key: str, timeout_s: float) -> str | None:
        try:
            db = self._open()
        except GuestbookUnreachable as exc:
            raise LookupUnavailable("the guestbook database cannot be opened") from exc
        with db:
            found = db.execute("SELECT id FROM entries WHERE key = ?", (key,)).fetchone()
        return f"entry-{found[0]}" if found else None


def entries(path: Path, key: str) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM entries WHERE key = ?", (key,)).fetchone()[0]


class TestGuestbookPassesTheTargetContract(DeduplicatingTargetContract):
    @pytest.fixture
    def target(self, tmp_path):
        return Guestbook(tmp_path / "guestbook.db")

    @pytest.fixture
    def unreachable(self, tmp_path):
        return Guestbook(tmp_path / "no-such-folder" / "guestbook.db")

    def effects(self, target, key):
        return entries(target.path, key)


class _ForgetfulGuestbook(Guestbook):
    """Claims to deduplicate but writes a second entry: the contract must catch it."""

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        with self._open() as db:
            (count,) = db.execute("SELECT count(*) FROM entries").fetchone()
            db.execute("INSERT INTO entries VALUES (?, ?, ?)",
                       (f"{request.key}#{count}", request.args_hash, count + 1))
        return f"entry-{count + 1}"


def test_the_contract_catches_a_connector_that_applies_twice(tmp_path):
    contract = TestGuestbookPassesTheTargetContract()
    forgetful = _ForgetfulGuestbook(tmp_path / "guestbook.db")
    with pytest.raises(AssertionError):
        contract.test_second_apply_with_the_same_key(forgetful)


def test_the_in_memory_ledger_decides_a_retry_as_the_processor_does():
    ledger = InMemoryLedger(now_ms=lambda: 1_000)
    refunds = Workflow("refunds", "v1")

    def refund(amount: int) -> Receipt:
        return ledger.submit(ledger.intent("acme/refund/r-1", "refund", "payments",
                                           {"amount": amount}, workflow=refunds))

    first, again = refund(100), refund(100)
    assert len(ledger.dispatches) == 1  # one effect for the key, however often it is asked
    assert first.status is again.status is ReceiptStatus.ACCEPTED
    with pytest.raises(ConflictError):  # as LedgerClient.submit raises it
        refund(999)
    assert ledger.status("acme/refund/r-1").reason.value == "conflict"


def test_the_in_memory_ledger_holds_only_what_its_freeze_covers():
    # The processor holds a key only under a freeze of its (tenant, action): a freeze of
    # acme's refunds leaves acme's charges and globex's refunds dispatched.
    freeze = Freeze("acme", "refund", FreezeMode.HOLD, "INC-7", "ops", "f-1", 1)
    ledger = InMemoryLedger(hold=Hold(freeze), now_ms=lambda: 1_000)
    flow = Workflow("billing", "v1")

    def submit(key: str, action: str) -> Receipt:
        return ledger.submit(ledger.intent(key, action, "payments", {"amount": 1},
                                           workflow=flow), raise_errors=False)

    assert submit("acme/refund/r-1", "refund").status is ReceiptStatus.HELD
    assert submit("acme/charge/c-1", "charge").status is ReceiptStatus.ACCEPTED
    assert submit("globex/refund/r-1", "refund").status is ReceiptStatus.ACCEPTED
    assert [d.key for d in ledger.dispatches] == ["acme/charge/c-1", "globex/refund/r-1"]


def test_the_in_memory_ledger_refuses_an_intent_the_processor_would_dead_letter():
    # LedgerClient.submit raises InvalidIntentError for an intent changed after intent():
    # the processor would dead-letter it, so no receipt would ever come.
    ledger = InMemoryLedger(now_ms=lambda: 1_000)
    intent = ledger.intent("acme/refund/r-1", "refund", "payments", {"amount": 1},
                           workflow=Workflow("refunds", "v1"))
    tampered = dataclasses.replace(intent, args_json='{"amount":1000}')
    with pytest.raises(InvalidIntentError, match="args_hash"):
        ledger.submit(tampered)
    assert (ledger.intents, ledger.dispatches, ledger.receipts) == ([], [], [])


def test_the_memory_target_and_store_contract_are_in_the_kit():
    assert MemoryTarget().deduplicates
    assert PartitionStoreContract.__module__ == "ledger_stream.testing.stores"
