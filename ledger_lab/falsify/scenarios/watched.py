"""Scenario 16: a tool that bypasses the ledger, caught at the target.

16. The agent's refund goes through the ledger. Then a second worker runs the same agent
    with its refund tool wired straight to the payments API (an idempotency key minted per
    call, no intent) and pays the same invoice again. Expected: a watcher on the payments
    sandbox (``ledger-stream watch sandbox --key-template 'acme/refund/{invoice}'``) raises
    ``effect_without_intent`` for the refund's key within seconds, although no connector
    ever saw that payment; the ledger's key keeps its one effect and its receipt (an effect
    made around the ledger never settles or changes a key). Bypassed (no ledger, no
    watcher): two payments, and nothing says so.
"""

from __future__ import annotations

import time

from ledger_lab.falsify.evidence import refund_key
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run

KEY_TEMPLATE = "acme/refund/{invoice}"
CAUGHT_WITHIN_S = 15.0
QUIET_S = 2.0  # four polls of the watcher after the ledger's own payment


def bypass_caught_at_target(run: Run) -> RunResult:
    invoice = run.new_invoice()
    key = refund_key(invoice)
    if run.ledger:
        run.world.start_watcher(KEY_TEMPLATE)
    thread = run.start(invoice)
    run.ok(run.worker(thread, "approve"), "approve")
    if run.ledger:
        run.check(run.wait_status(key, {"succeeded"}) == "succeeded",
                  f"{key} did not settle through the ledger")
        # The ledger's own payment is no news: a watcher that alerts it fails here.
        run.check(not run.has_alert(key, "effect_without_intent", timeout_s=QUIET_S),
                  "the watcher alerted the ledger's own payment")
    rogue = run.start(invoice, bypass=True)
    run.ok(run.worker(rogue, "approve", bypass=True), "the bypassing worker's approve")
    if not run.ledger:
        return run.finish()
    paid = time.monotonic()
    bypassed = [e["id"] for e in run.world.effects(invoice, bypass=True)]
    run.check(len(bypassed) == 1, f"{len(bypassed)} bypassing payments at the target")
    caught = bool(bypassed) and run.has_alert(key, "effect_without_intent",
                                              timeout_s=CAUGHT_WITHIN_S,
                                              naming=f"(id {bypassed[0]})")
    run.check(caught, f"no effect_without_intent for {key} naming the bypassing payment "
              f"within {CAUGHT_WITHIN_S:.0f} s")
    if caught:
        run.note(f"the bypassing payment was alerted {time.monotonic() - paid:.1f} s after "
                 "it was made")
    return run.finish()
