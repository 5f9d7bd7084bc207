"""Scenarios 9 and 10: the ledger's own processes die mid-operation.

The target takes ``CALL_S`` to commit (a sandbox delay), and the connector is given a call
timeout and lease that cover it, so the effect is on the wire when the process is killed:

9. The processor is SIGKILLed once it has granted the attempt; a new processor (same state
   folder, same group) takes over after the rebalance and must settle the key from the
   outcome the connector reported while no processor was running.
10. The connector is SIGKILLed during the call (the target still commits); a replacement
    re-reads the uncommitted dispatch, meets the key again and must not pay twice.

No bypassed run: neither process exists without the ledger.
"""

from __future__ import annotations

import time

from ledger_lab.falsify.evidence import refund_key
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run

CALL_S = 3.0
SLOW_CALLS = {"LEDGER_CONNECTOR_CALL_TIMEOUT_S": "6", "LEDGER_CONNECTOR_LEASE_MS": "10000"}
IN_FLIGHT = {"in_progress"}


def processor_restart(run: Run) -> RunResult:
    return _killed_mid_call(run, "processor")


def connector_restart(run: Run) -> RunResult:
    return _killed_mid_call(run, "connector")


def _killed_mid_call(run: Run, victim: str) -> RunResult:
    world = run.world
    world.stop_connector()
    world.start_connector(env=SLOW_CALLS)
    invoice = run.new_invoice()
    key = refund_key(invoice)
    thread = run.start(invoice)
    world.sandbox.set_fault("delay_before_commit", key=key, delay_s=CALL_S)
    approve = run.background(run.worker, thread, "approve")
    seen = run.wait_status(key, IN_FLIGHT | {"succeeded"}, timeout_s=60)
    killed_at = time.monotonic()
    if victim == "processor":
        world.stack.restart_processor(kill=True)
    else:
        world.stop_connector(kill=True)
        world.start_connector()
    run.check(seen in IN_FLIGHT, f"the key was {seen or 'unknown'} when the {victim} was "
              "killed, not in flight")
    run.note(f"{victim} SIGKILLed while the key was {seen}, the call on the wire")
    run.ok(approve.result(150), "approve")
    run.note(f"settled {time.monotonic() - killed_at:.1f}s after the kill")
    return run.finish()
