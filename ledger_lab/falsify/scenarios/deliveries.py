"""Scenarios 17-18: the same intent delivered again by the runtime around the agent.

17. LangGraph's functional API: an ``@entrypoint`` (with a checkpointer) issues the refund
    in a ``@task``. The worker is SIGKILLed inside the task after the target committed; a
    task's result is saved only when it returns, so the resumed entrypoint runs the task
    again. When the kill came before the approval (the ``Command(resume=...)`` value) was
    saved, the thread is still waiting for it, and the operator approves again: the task
    runs again either way.
18. A work queue: a worker takes a refund job, pays, and is SIGKILLed before it
    acknowledges the job; the queue delivers the job again and the next worker pays again.

With the ledger, both repeats are a second intent for the invoice's key and get the original
receipt: one effect. Bypassed, the repeat pays a second time.
"""

from __future__ import annotations

import contextlib
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from ledger_lab.falsify.evidence import refund_key
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run

FUNCTIONAL = "functional"


def functional_task_killed(run: Run) -> RunResult:
    invoice = run.new_invoice()
    key = refund_key(invoice)
    thread = run.start(invoice, graph=FUNCTIONAL)
    run.killed(run.worker(thread, "approve", graph=FUNCTIONAL, failpoint="after_receipt"),
               "approve, killed inside the task after the target committed")
    run.resume(thread, graph=FUNCTIONAL)
    if run.ledger:
        intents = run.intents(key)
        run.check(len(intents) == 2, f"{len(intents)} intents for {key}, expected 2: the "
                  "task did not run again after the crash")
    return run.finish()


def queue_redelivery(run: Run) -> RunResult:
    invoice = run.new_invoice()
    key = refund_key(invoice)
    world = run.world
    topic = f"{world.stack.settings.topic_prefix}.refund-jobs-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": world.stack.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    bypass = not run.ledger
    try:
        queued = run.ok(world.queue_worker(topic, "enqueue", "--invoice", invoice,
                                           bypass=bypass), "enqueue")
        run.killed(world.queue_worker(topic, "work", failpoint="after_receipt", bypass=bypass),
                   "work, killed after the refund, before the job was acknowledged")
        again = run.ok(world.queue_worker(topic, "work", bypass=bypass), "work the redelivery")
        job = (queued.output or {}).get("job_id")
        run.check(job is not None and (again.output or {}).get("job_id") == job,
                  f"the queue did not deliver job {job} again: {again.output}")
        if run.ledger:
            intents = run.intents(key)
            run.check(len(intents) == 2, f"{len(intents)} intents for {key}, expected 2 "
                      "(one per delivery)")
    finally:
        with contextlib.suppress(Exception):  # best effort: a leftover topic changes nothing
            admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    return run.finish()
