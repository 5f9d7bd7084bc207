"""Scenario 14: a side effect before ``interrupt()`` in the same node.

LangGraph resumes an interrupted node from its top, so everything the node did before
``interrupt()`` runs again on resume, and again when the checkpoint before the node is
replayed. The ``effect-before-interrupt`` variant refunds, then asks for a confirmation:
approve (refund, pause), confirm (the node re-runs: refund again, then continues), replay
(the node runs a third time). With the ledger: three intents, one effect.
"""

from __future__ import annotations

from ledger_lab.falsify.evidence import refund_key
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run

GRAPH = "effect-before-interrupt"


def effect_before_interrupt(run: Run) -> RunResult:
    invoice = run.new_invoice()
    key = refund_key(invoice)
    thread = run.start(invoice, graph=GRAPH)
    run.ok(run.worker(thread, "approve", graph=GRAPH), "approve (refund, then interrupt)")
    run.ok(run.worker(thread, "confirm", graph=GRAPH), "confirm (the node re-runs)")
    run.ok(run.worker(thread, "replay", graph=GRAPH), "replay (the node runs again)")
    if run.ledger:
        intents = run.intents(key)
        run.check(len(intents) == 3, f"{len(intents)} intents for {key}, expected 3: the "
                  "node did not re-run its effect on resume and on replay")
    return run.finish()
