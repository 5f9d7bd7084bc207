"""Scenarios 1-4: the ways LangGraph re-runs a tool step that already paid.

1. The worker is killed after the target committed, before the reply is saved; the thread
   is resumed, and the tools step runs again from its top.
2. The pre-call checkpoint is replayed (``get_state_history``, ``invoke(None, config)``).
3. The pre-call checkpoint is forked with the same arguments (``update_state``, invoke).
4. The fork changes a material argument (the amount): the ledger rejects it as a conflict
   and nothing reaches the target. 4b: the same fork before the original call ran, so the
   key is new: the approval (bound to the original amount) does not cover it.
"""

from __future__ import annotations

from typing import Any

from ledger_lab.falsify.evidence import TargetLedger, refund_key
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run
from ledger_stream.domain.keys import args_hash

AMOUNT, CHANGED = 125.0, 999.0


def refund_hash(invoice: str, amount: float) -> str:
    return args_hash({"invoice": invoice, "amount": amount, "currency": "EUR"})


def kill_after_commit_then_resume(run: Run) -> RunResult:
    invoice = run.new_invoice()
    thread = run.start(invoice)
    run.killed(run.worker(thread, "approve", failpoint="after_receipt"),
               "approve, killed after the target committed")
    resumed = run.ok(run.worker(thread, "resume"), "resume")
    if run.ledger:
        _asked_by(run, resumed, refund_key(invoice), "resume")
    return run.finish()


def replay_pre_call_checkpoint(run: Run) -> RunResult:
    return _rerun_after_the_call(run, "replay")


def fork_same_args(run: Run) -> RunResult:
    return _rerun_after_the_call(run, "fork")


def _rerun_after_the_call(run: Run, action: str) -> RunResult:
    """Approve (the refund is paid), then re-run the pre-call checkpoint with ``action``."""
    invoice = run.new_invoice()
    thread = run.start(invoice)
    run.ok(run.worker(thread, "approve"), "approve")
    again = run.ok(run.worker(thread, action), action)
    if run.ledger:
        _same_external_id(run, again.output, refund_key(invoice))
        _asked_by(run, again, refund_key(invoice), action)
    return run.finish()


def fork_changed_amount(run: Run) -> RunResult:
    invoice = run.new_invoice()
    key = refund_key(invoice)
    thread = run.start(invoice, AMOUNT)
    run.ok(run.worker(thread, "approve"), "approve")
    run.conflict(key, refund_hash(invoice, CHANGED))
    forked = run.ok(run.worker(thread, "fork", "--amount", str(CHANGED)), "fork")
    if run.ledger:
        receipt = run.receipt(forked, key)
        run.check((receipt.get("status"), receipt.get("reason")) == ("rejected", "conflict"),
                  f"the changed fork was answered {receipt}, expected rejected/conflict")
        run.check(run.has_alert(key, "conflicting_arguments", naming="from a fork run"),
                  "no conflicting_arguments alert naming the fork")
        _asked_by(run, forked, key, "fork")
    return run.finish()


def fork_changed_amount_before_call(run: Run) -> RunResult:
    """4b: the thread is approved for 125 and stopped before its call; a fork asks for 999
    on the fresh key. The approval binds 125, so the ledger refuses; nothing is paid."""
    invoice = run.new_invoice(effects=0, status="rejected")
    key = refund_key(invoice)
    thread = run.start(invoice, AMOUNT)
    run.killed(run.worker(thread, "approve", failpoint="before_intent"),
               "approve, killed before the call")
    run.conflict(key, refund_hash(invoice, CHANGED))
    forked = run.ok(run.worker(thread, "fork", "--amount", str(CHANGED)), "fork")
    if run.ledger:
        receipt = run.receipt(forked, key)
        run.check((receipt.get("status"), receipt.get("reason")) == ("rejected", "approval"),
                  f"the changed fork was answered {receipt}, expected rejected/approval")
        run.check(run.has_alert(key, "approval_mismatch"), "no approval_mismatch alert")
    else:
        bad = refund_hash(invoice, CHANGED)
        run.demonstration = lambda target, keys: _paid_unapproved(target, key, bad)
    return run.finish()


def _paid_unapproved(target: TargetLedger, key: str, bad_hash: str) -> tuple[bool, str]:
    paid = [e for e in target.effects_for(key, bypass=True) if e["body_hash"] == bad_hash]
    return bool(paid), f"{len(paid)} refunds of {CHANGED:.0f} paid on an approval of " \
        f"{AMOUNT:.0f} for {key}"


def _asked_by(run: Run, done: Any, key: str, origin: str) -> None:
    """The receipt the re-run got names which kind of run asked (langgraph/origin.py)."""
    receipt = run.receipt(done, key)
    run.check(receipt.get("origin") == origin,
              f"the {origin} got a receipt naming origin {receipt.get('origin')!r}")


def _same_external_id(run: Run, output: dict[str, Any] | None, key: str) -> None:
    held = ((output or {}).get("ledger_receipts") or {}).get(key) or {}
    first = run.world.sandbox.effects(key)
    run.check(held.get("status") == "succeeded" and bool(first)
              and held.get("external_id") == first[0]["id"],
              f"the re-run got {held}, not the original receipt {first[:1]}")

