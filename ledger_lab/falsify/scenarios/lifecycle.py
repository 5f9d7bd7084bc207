"""Scenarios 12 and 13: a key's life in time, and a workflow that changed under it.

12. The ledger keeps a settled key authoritative for its replay window (20 s in this
    scenario's world, ``LEDGER_REPLAY_WINDOW_MS``). A replay inside the window gets the
    original receipt; a replay after it is rejected (``expired_key``) and never dispatched:
    an expired key never silently becomes new work.
13. Version 2.0 of the agent renames the tools node and derives the refund's arguments
    differently (amount in minor units): the same key, another args hash. Expected:
    ``ledger-stream upgrade-check`` of v2, run before the deploy, flags the v1 thread whose
    refund is in flight (exit 1: its intent would be an orphan; the renamed node's pending task
    is dropped); v2 resuming a v1 thread does not run the renamed step at all (LangGraph drops a
    pending task whose node the graph no longer has: no intent, no effect); v2 asking while v1's
    refund is in flight is rejected as a conflict (other arguments are a conflict whatever the
    version says: docs/design.md, 'The decision table'; since commit 98f2ab6), and so is v2
    asking after it settled; the v1 graph deployed as version 2.0 (the same arguments) asking
    while v1's refund is in flight is held (``version_mismatch``, no dispatch); one effect, with
    v1's arguments.
"""

from __future__ import annotations

from ledger_lab.falsify.evidence import LedgerTopics, refund_key
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash

WINDOW_MS = 20_000
# When the retries start, around the end of the window. The early one has 8 s to reach the
# ledger: on a loaded machine (the matrix runs beside the test suite) a replay's intent has
# been seen to take more than 1.5 s from its start to the broker.
EARLY_MS, LATE_MS = 8_000, 500
EXPIRY_ENV = {"LEDGER_REPLAY_WINDOW_MS": str(WINDOW_MS)}
V2 = "refund-v2"
UPGRADES = "examples.refund_agent.upgrades"
UPGRADE_GRAPHS = {"refund-v2": f"{UPGRADES}:refund_v2",
                  "refund-agent-v2": f"{UPGRADES}:refund_agent_v2"}
AMOUNT = 125.0


def retry_around_expiry(run: Run) -> RunResult:
    # A sealed key keeps its outcome: the late intent is answered rejected (expired_key),
    # and the key itself stays succeeded (domain/outputs.py: key_status).
    invoice = run.new_invoice(status="succeeded")
    key = refund_key(invoice)
    thread = run.start(invoice)
    run.ok(run.worker(thread, "approve"), "approve")
    if not run.ledger:  # no ledger, no window: any retry pays again
        run.ok(run.worker(thread, "replay"), "replay")
        return run.finish()
    settled = [r for r in run.world.stack.receipts(key)
               if r.key_status is ev.ReceiptStatus.SUCCEEDED]
    if not run.check(bool(settled), f"{key} did not settle"):
        return run.finish()
    terminal_ms = settled[0].at_ms
    # The worker starts early and invokes at the given instant: its intent is stamped a
    # few hundred milliseconds later (the graph's replay, then the tool).
    before = run.ok(run.worker(thread, "replay", *_at(terminal_ms + WINDOW_MS - EARLY_MS)),
                    "replay before expiry")
    early = _answered(run, run.receipt(before, key), key)
    run.check(early is not None and early.status is ev.ReceiptStatus.SUCCEEDED
              and early.external_id == settled[0].external_id,
              f"the replay inside the window was answered {early}, not the original receipt")
    if early is not None:
        run.note(f"retry {WINDOW_MS - (early.at_ms - terminal_ms)} ms before expiry: "
                 "deduplicated")
    after = run.ok(run.worker(thread, "replay", *_at(terminal_ms + WINDOW_MS + LATE_MS)),
                   "replay after expiry")
    late = _answered(run, run.receipt(after, key), key)
    run.check(late is not None and (late.status, late.reason) ==
              (ev.ReceiptStatus.REJECTED, ev.Reason.EXPIRED_KEY),
              f"the replay after the window was answered {late}, expected rejected/expired")
    if late is not None:
        run.note(f"retry {late.at_ms - terminal_ms - WINDOW_MS} ms after expiry: rejected")
    dispatches = [d for d in LedgerTopics.read(run.world).dispatches if d.key == key]
    run.check(len(dispatches) == 1, f"{len(dispatches)} dispatches for {key}, expected 1")
    run.check(run.has_alert(key, "expired_key_reuse"), "no expired_key_reuse alert")
    return run.finish()


def _gate_before_deploy(run: Run, thread: str, v2_graph: str, key: str) -> None:
    """``ledger-stream upgrade-check`` before v2 is deployed: the v1 thread whose refund
    step is pending is unsafe (its intent would be an orphan), exit status 1."""
    check = run.world.upgrade_check(UPGRADE_GRAPHS[v2_graph], thread)
    found = [(f["kind"], f["key"] or f["node"]) for t in (check.output or {}).get("threads", [])
             for f in t["findings"]]
    run.check(check.returncode == 1 and ("orphan", key) in found,
              f"upgrade-check of v2 did not flag the v1 thread (exit {check.returncode}, "
              f"{found}): {check.log[-600:]}")
    run.note("upgrade-check before deploying v2: " + ", ".join(f"{kind} {what}"
                                                             for kind, what in found))


def _answered(run: Run, summary: dict[str, str], key: str) -> ev.Receipt | None:
    wanted = summary.get("intent_event_id")
    return next((r for r in run.world.stack.receipts(key) if r.intent_event_id == wanted),
                None)


def _at(at_ms: int) -> tuple[str, str]:
    return ("--start-at", f"{at_ms / 1000:.3f}")


def refund_args_v2(invoice: str, amount: float) -> dict[str, object]:
    """How version 2.0 of the example agent derives the refund (examples/refund_agent)."""
    return {"invoice": invoice, "amount_minor": round(amount * 100), "currency": "EUR"}


def incompatible_update(run: Run) -> RunResult:
    world = run.world
    invoice = run.new_invoice()
    key = refund_key(invoice)
    v2_graph = run.variant(V2)  # the v2 of this run's agent flavour
    v1 = run.start(invoice, AMOUNT)
    if not run.ledger:  # both versions pay the same refund
        run.ok(run.worker(v1, "approve"), "v1 approve")
        v2 = run.start(invoice, AMOUNT, graph=v2_graph)
        run.ok(run.worker(v2, "approve", graph=v2_graph), "v2 approve")
        return run.finish()
    world.stop_connector()  # v1's refund stays in flight
    run.killed(run.worker(v1, "approve", failpoint="after_intent"),
               "v1 approve, killed after its intent")
    _gate_before_deploy(run, v1, v2_graph, key)
    resumed = run.worker(v1, "resume", graph=v2_graph)
    v2_intents = [i for i in run.intents(key) if not i.workflow.version.startswith("1")]
    run.check(not v2_intents, f"v2 resuming a v1 thread sent {len(v2_intents)} intents")
    run.note(f"v2 resumed the v1 thread (exit {resumed.returncode}) without running the "
             "renamed step: no intent")
    v2 = run.start(invoice, AMOUNT, graph=v2_graph)
    run.conflict(key, args_hash(refund_args_v2(invoice, AMOUNT)))
    early = run.receipt(run.ok(run.worker(v2, "approve", graph=v2_graph), "v2 approve"), key)
    run.check((early.get("status"), early.get("reason")) == ("rejected", "conflict"),
              f"v2 while v1 is in flight was answered {early}, expected rejected/conflict")
    run.check(run.has_alert(key, "conflicting_arguments"), "no conflicting_arguments alert")
    # The same arguments under an incompatible version: held until v1's refund settles.
    same = run.start(invoice, AMOUNT, version="2.0")
    held = run.receipt(run.ok(run.worker(same, "approve", version="2.0"),
                              "v1 graph as 2.0 approve"), key)
    run.check((held.get("status"), held.get("reason")) == ("held", "version"),
              f"the v1 graph as 2.0 while v1 is in flight was answered {held}, "
              "expected held/version")
    run.check(run.has_alert(key, "version_mismatch"), "no version_mismatch alert")
    world.start_connector()
    run.check(run.wait_status(key, {"succeeded"}) == "succeeded", "v1's refund never settled")
    original = run.receipt(run.ok(run.worker(v1, "replay"), "v1 replay"), key)
    run.check(original.get("status") == "succeeded", f"v1's replay was answered {original}")
    retried = run.receipt(run.ok(run.worker(v2, "replay", graph=v2_graph), "v2 replay"), key)
    run.check((retried.get("status"), retried.get("reason")) == ("rejected", "conflict"),
              f"v2 after v1 settled was answered {retried}, expected rejected/conflict")
    return run.finish()
