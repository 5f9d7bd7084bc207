"""Scenarios 6-8: ambiguous outcomes at the target, injected by the sandbox itself.

6. The target commits, then drops the connection without an answer.
7. The client times out before the target commits (the commit lands later).
8. The target crashes right after committing and is restarted on the same port;
   8b: it crashes before committing.
   6b: as 6, at a target that cannot be queried (an API without a lookup by key).

With the ledger, the connector reports ``unknown``, the ledger reconciles by key (a lookup
at the target) before anything is resent, and the key ends ``succeeded`` with one effect.
When the target cannot be queried nothing can settle the key but an operator: it ends
``needs_reconciliation``, and no re-run of the step resends the refund.
Bypassed, the tool sees an error, the run fails, and resuming the thread pays again.
"""

from __future__ import annotations

import contextlib

from ledger_lab.falsify.evidence import refund_key
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run
from ledger_lab.harness.stack import FAST

# The connector's call timeout in test worlds, and the bypassed tool's in these scenarios.
TIMEOUT_S = float(FAST["LEDGER_CONNECTOR_CALL_TIMEOUT_S"])
COMMIT_DELAY_S = 3.0


def commit_then_drop(run: Run) -> RunResult:
    return _ambiguous(run, "commit_then_drop")


def commit_then_drop_unqueryable(run: Run) -> RunResult:
    """6b: the connector is declared without a lookup; the key must wait for an operator."""
    run.world.stop_connector()
    run.world.start_connector(lookup=False)
    run.target_queryable = False
    return _ambiguous(run, "commit_then_drop", status="needs_reconciliation")


def timeout_before_commit(run: Run) -> RunResult:
    return _ambiguous(run, "delay_before_commit", delay_s=COMMIT_DELAY_S)


def target_restart_after_commit(run: Run) -> RunResult:
    return _ambiguous(run, "crash_after_commit", restart=True)


def target_restart_before_commit(run: Run) -> RunResult:
    return _ambiguous(run, "crash_before_commit", restart=True)


def _ambiguous(run: Run, fault: str, delay_s: float | None = None,
               restart: bool = False, status: str = "succeeded") -> RunResult:
    sandbox = run.world.sandbox
    invoice = run.new_invoice(status=status)
    key = refund_key(invoice)
    thread = run.start(invoice)
    sandbox.clear_faults()
    # A bypassed tool mints its key per execution: the fault takes the next new key.
    sandbox.set_fault(fault, key=key if run.ledger else None, delay_s=delay_s)
    timeout = ("--http-timeout", str(TIMEOUT_S))
    approve = run.background(run.worker, thread, "approve", *timeout)
    if restart:
        code = sandbox.wait_exit(60)
        run.check(code in (70, 71), f"the sandbox exited {code}, not by the {fault} fault")
        sandbox.restart()
    done = approve.result(150)
    if run.ledger:
        run.expect_ambiguous = True
        run.ok(done, "approve")
        run.check(any(r["result"] == f"fault:{fault}" for r in sandbox.ledger()["requests"]
                      if r["idempotency_key"] == key), f"the {fault} fault never fired")
        if not run.target_queryable:  # a re-run of the step must not resend it either
            run.ok(run.worker(thread, "replay", *timeout), "replay")
            sent = sum(r["idempotency_key"] == key for r in sandbox.ledger()["requests"])
            run.check(sent == 1, f"{sent} requests for {key}, expected 1: resent unqueried")
    else:
        run.check(done.returncode != 0, "the bypassed tool did not notice the fault")
        run.ok(run.worker(thread, "resume", *timeout), "resume (the agent retries)")
        if delay_s:  # the first request commits late: wait for that commit before judging
            prefix = f"bypass-{invoice}-"
            with contextlib.suppress(TimeoutError):  # the verdict below says what is missing
                sandbox.wait_ledger(lambda ledger: sum(
                    e["idempotency_key"].startswith(prefix) for e in ledger["effects"]) >= 2,
                    timeout_s=delay_s + 10)
    return run.finish()
