"""Scenario 5: a SIGKILL at every failpoint (docs/design.md, 'Proof layers'), agent side
and connector side.

Agent failpoints kill the worker during ``approve`` (the step that runs the tool); the thread
is then resumed by a new worker. ``after_graph_update`` kills it in the model node that
reads the tool's reply, i.e. after the tools step's checkpoint was written (with durability
``sync``; with ``async`` that write may be lost, and the resume re-runs the tool). With
``async`` even the approval's checkpoint may die with a worker killed in the tool: the resumed
thread is back at the approval, and the human approves again (``Run.resume``).

Connector failpoints kill the payments connector (the worker keeps waiting for its receipt);
a replacement connector takes over the dispatch once the group has rebalanced.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run

AGENT_FAILPOINTS = ("before_intent", "after_intent", "after_receipt", "after_graph_update")
CONNECTOR_FAILPOINTS = ("before_claim", "before_call", "after_call", "before_outcome",
                        "after_outcome")
FAILPOINTS = AGENT_FAILPOINTS + CONNECTOR_FAILPOINTS
# Only a kill after the target committed leaves a bypassed agent a reason to pay again.
BYPASS_MEANINGFUL = frozenset({"after_receipt"})


def killed_at(point: str) -> Callable[[Run], RunResult]:
    if point not in FAILPOINTS:
        raise ValueError(f"unknown failpoint {point!r}")

    def play(run: Run) -> RunResult:
        if point in CONNECTOR_FAILPOINTS:
            return _connector_killed(run, point)
        invoice = run.new_invoice()
        thread = run.start(invoice)
        run.killed(run.worker(thread, "approve", failpoint=point), f"approve, killed at {point}")
        run.resume(thread)
        return run.finish()

    play.__name__ = f"killed_at_{point}"
    return play


def _connector_killed(run: Run, point: str) -> RunResult:
    world = run.world
    invoice = run.new_invoice()
    thread = run.start(invoice)
    world.stop_connector()
    doomed = world.start_connector(failpoint=point)
    approve = run.background(run.worker, thread, "approve")
    deadline = time.monotonic() + 60
    while doomed.alive() and time.monotonic() < deadline and not approve.done():
        time.sleep(0.1)
    run.check(not doomed.alive() and doomed.popen.returncode == -9,
              f"the connector was not killed at {point} (exit {doomed.popen.poll()})")
    world.stop_connector()
    world.start_connector()
    done = approve.result(150)
    run.ok(done, "approve (waiting through the connector's death)")
    run.ok(run.worker(thread, "resume"), "resume")
    return run.finish()
