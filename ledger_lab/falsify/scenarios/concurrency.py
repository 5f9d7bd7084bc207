"""Scenarios 11 and 15: one step executed twice at the same time, or two effects in one step.

11. The approved thread's worker dies before its call; two workers resume the thread at
    once (two processes reading the same checkpoint): both run the tool step.
15. The model asks for two refunds in one message; the two tool calls run as parallel tasks
    of one step. The worker is killed after the first receipt, the thread is resumed, and
    the pre-call checkpoint is replayed: each of the two keys is paid exactly once.
"""

from __future__ import annotations

import time

from ledger_lab.falsify.evidence import refund_key
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run

PARALLEL = "parallel"
LINE_UP_S = 6.0  # more than two workers need to start side by side on a busy machine


def two_workers_resume_at_once(run: Run) -> RunResult:
    invoice = run.new_invoice()
    key = refund_key(invoice)
    thread = run.start(invoice)
    run.killed(run.worker(thread, "approve", failpoint="before_intent"),
               "approve, killed before the call")
    # Both processes load the graph, then invoke at the same instant: each reads the same
    # pre-call checkpoint before either has written the tools step.
    at = ("--start-at", f"{time.time() + LINE_UP_S:.3f}")
    first = run.background(run.worker, thread, "resume", *at)
    second = run.background(run.worker, thread, "resume", *at)
    for done in (first.result(150), second.result(150)):
        run.ok(done, "concurrent resume")
    if run.ledger:
        intents = run.intents(key)
        run.check(len(intents) == 2, f"{len(intents)} intents for {key}: the two workers did "
                  "not both run the tool step")
        run.note(f"{len(intents)} workers ran the tool step concurrently")
    return run.finish()


def parallel_tool_calls(run: Run) -> RunResult:
    base = run.invoice_id()  # the model asks for <base>-a and <base>-b
    for part in ("a", "b"):
        run.track(refund_key(f"{base}-{part}"))
    graph = run.variant(PARALLEL)
    thread = run.start(base, graph=graph)
    run.killed(run.worker(thread, "approve", failpoint="after_receipt", graph=graph),
               "approve, killed after the first receipt")
    run.ok(run.worker(thread, "resume", graph=graph), "resume")
    run.ok(run.worker(thread, "replay", graph=graph), "replay")
    return run.finish()
