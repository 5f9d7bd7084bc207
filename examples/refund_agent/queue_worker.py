"""The refund as a job on a work queue: one worker process takes one job and acknowledges it.

    python -m examples.refund_agent.queue_worker --topic jobs enqueue --invoice inv-1 \
        --amount 125
    python -m examples.refund_agent.queue_worker --topic jobs work [--bypass-url URL]

``enqueue`` plays the approval service and the requester: it signs the refund's approval and
puts the job on the queue (a one-partition Kafka topic). ``work`` takes the next job not yet
acknowledged (the queue's committed offset), issues the refund, and only then acknowledges
it (commits the offset): at-least-once, as work queues deliver. A worker that dies between
the refund and the acknowledgement leaves the job to be delivered again, and the next worker
issues the same refund again. With the ledger the job's intent is keyed by the invoice, so
the redelivered intent gets the original receipt; with ``--bypass-url`` the refund goes
straight to the payments API with a key minted per delivery, and is paid twice.

Kafka and the ledger topics come from LEDGER_* settings. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from contextlib import ExitStack
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from examples.refund_agent.approvals import sign_refund
from examples.refund_agent.graph import VERSION, refund_args
from examples.refund_agent.variants import Effects
from ledger_stream import LedgerClient
from ledger_stream.config import Settings

NODE = "refund_job"  # what the ledger's workflow record calls the worker's step


def enqueue(settings: Settings, topic: str, invoice: str, amount: float) -> dict[str, Any]:
    material = refund_args(invoice, amount)
    job = {"job_id": f"job-{uuid.uuid4().hex[:8]}", "invoice": invoice, "amount": amount,
           "approval": sign_refund(settings, material)}
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "acks": "all"})
    producer.produce(topic, json.dumps(job).encode(), key=invoice.encode())
    if producer.flush(30) != 0:
        raise SystemExit("the job was not acknowledged by Kafka within 30 s")
    return {"job_id": job["job_id"]}


def work(settings: Settings, topic: str, bypass_url: str | None,
         wait_s: float) -> dict[str, Any]:
    """Take the next unacknowledged job, refund, acknowledge. The queue's group holds the
    acknowledged position; the worker reads its one partition directly (no group
    membership), so a dead worker's job is free for the next one at once."""
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap,
                         "group.id": f"{topic}-workers", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        msg = consumer.poll(wait_s)
        if msg is None or msg.error():
            raise SystemExit(f"no job on {topic} within {wait_s:g} s: {msg and msg.error()}")
        job = json.loads(msg.value())
        with ExitStack() as stack:
            client = None if bypass_url else stack.enter_context(LedgerClient(settings))
            effects = Effects(client, bypass_url, VERSION)
            answer = effects.refund(refund_args(job["invoice"], job["amount"]),
                                    {"approval": job["approval"]}, job["job_id"], NODE)
        # The acknowledgement: only after the refund. A crash above redelivers the job.
        consumer.commit(offsets=[TopicPartition(topic, 0, msg.offset() + 1)],
                        asynchronous=False)
        return {"job_id": job["job_id"], "offset": msg.offset(), "refund": answer}
    finally:
        consumer.close()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refund-queue-worker", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topic", required=True, help="the work queue (a one-partition topic)")
    p.add_argument("--bypass-url", help="call this payments API directly, without the ledger")
    p.add_argument("--wait", type=float, default=30.0, help="seconds to wait for a job")
    p.add_argument("action", choices=("enqueue", "work"))
    p.add_argument("--invoice", default="inv-1")
    p.add_argument("--amount", type=float, default=125.0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = Settings()
    if args.action == "enqueue":
        result = enqueue(settings, args.topic, args.invoice, args.amount)
    else:
        result = work(settings, args.topic, args.bypass_url, args.wait)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
