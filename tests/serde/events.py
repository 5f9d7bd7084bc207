"""One event of every type the codec knows: the sample the serde and value tests share (a
fixtures module: it holds no tests)."""

from __future__ import annotations

from ledger_lab.harness.approvers import TEST_APPROVER
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import sign_approval
from tests.factories import KEY, claim, intent, outcome, reconciled, resolution


def one_of_each() -> list:
    i = intent(approval=sign_approval(TEST_APPROVER, KEY, "a1", "h" * 64, "p1", 99),
               payload_json='{}',
               observations=(ev.Observation("model", "ab" * 32, 812, "gpt-x", "t1", "agent", 3),
                             ev.Observation("prices", "cd" * 32, 40)))
    return [
        i, intent(), claim(), outcome(ev.OutcomeStatus.SUCCEEDED, external_id="pay-1"),
        reconciled(ev.ReconcileStatus.NOT_FOUND),
        resolution(ev.Resolution.APPLIED, external_id="x"),
        ev.Dispatch("d", KEY, 1, "e", "acme", "refund", "sandbox", "{}", "h", "", 5, 6),
        ev.Grant(KEY, 1, "c", 9, 1), ev.Held(KEY, 1, "c", 9, 1),
        ev.Reconcile(KEY, 1, "c", "sandbox", 1), ev.Done(KEY, 1, "c", 1),
        ev.Receipt("r", KEY, "e", ev.ReceiptStatus.SUCCEEDED, ev.Reason.NONE, "h", 1, 2, "x"),
        ev.Alert("a", KEY, ev.AlertKind.DUPLICATE_EFFECT, "s", "d", 3),
        ev.DeadLetter("ledger.intents", 0, 5, "bad", 4, b"k", b"\x00\xff"),
        ev.DeadLetter("ledger.intents", 0, 5, "bad", 4),
        ev.Tick(3, "processor-1", 5),
        ev.Containment("f-1", 2, "refund", "acme", True, ev.FreezeMode.APPROVAL, "incident",
                       "ops", 7),
        ev.AuditRecord("a-1", "ops-ann", "operator", "key:0123456789ab",
                       ev.AuditAction.DECISION, "acme/refund/inv-1", "d-1",
                       "not_applied of attempt 1", 7),
    ]
