"""A connector killed right after it fenced a pre-granted dispatch, on the real broker with
the real processor (exactly once, pre-granting for 30 s) and the payments sandbox, declared
not deduplicating. The fence put the partition's next owner past the record, so nobody
reads it again: the processor's timers act at the pre-grant's end plus the skew margin
(domain/deadlines.py), where they waited ``stall_after`` (300 s) more. Calls and effects are
read from the sandbox's own ledger (every request it received), not from the ledger's
events; the failpoints (ledger_stream/failpoints.py) SIGKILL the connector's own PID."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.domain import events as ev
from ledger_stream.kafka.reader import read_topic, tail_topic
from ledger_stream.serde import AvroCodec
from tests.connectors.waits import wait_until

pytestmark = pytest.mark.timeout(300)

ARGS = {"amount": 900, "currency": "EUR", "to": "cust-5"}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}
PREGRANT_S = 30.0  # tests/connectors/conftest.py, pregrant_stack
SKEW_S = 0.5  # the stack's LEDGER_CLOCK_SKEW_MS
# Past the pre-grant's end plus the skew: the next Tick (1 s), the processor's transaction,
# the successor's claim (or lookup) and call, the receipt's. Far short of stall_after.
ROUND_S = 12.0


def connector(stack: Stack, sandbox: SandboxProc, failpoint: str | None = None):
    # No --deduplicates: a second call would be a second payment.
    return stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url,
                           failpoint=failpoint)


def owns_all(conn, partitions: int) -> bool:
    """Whether the connector was assigned every partition (its log's JSON lines say so)."""
    lines = [json.loads(line) for line in conn.tail(400).splitlines() if line.startswith("{")]
    owned = {p for e in lines if e.get("msg") == "partitions assigned"
             for p in e.get("partitions") or ()}
    return len(owned) >= partitions


def dispatch_records(stack: Stack, key: str) -> list[tuple[int, int, ev.OutputEvent]]:
    """(partition, offset, event) of the key's records on ledger.dispatch, in order."""
    codec, found = AvroCodec(), []
    for partition, offset, value in tail_topic(stack.bootstrap,
                                               stack.settings.topic("dispatch"), follow=False):
        event = codec.decode(value) if value is not None else None
        if event is not None and getattr(event, "key", None) == key:
            found.append((partition, offset, event))
    return found


def claims_of(stack: Stack, key: str) -> list[ev.AttemptClaim]:
    return [e for e in read_topic(stack.bootstrap, stack.settings.topic("attempts"))
            if isinstance(e, ev.AttemptClaim) and e.key == key]


def committed(stack: Stack, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": stack.bootstrap,
                         "group.id": f"{stack.settings.topic_prefix}.connector.sandbox"})
    try:
        (tp,) = consumer.committed([TopicPartition(stack.settings.topic("dispatch"),
                                                   partition)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def alerts_of(stack: Stack, key: str) -> list[ev.AlertKind]:
    return [a.kind for a in read_topic(stack.bootstrap, stack.settings.topic("alerts"))
            if a.key == key]


def killed_after_its_fence(stack: Stack, sandbox: SandboxProc, failpoint: str):
    """A connector that owns every partition takes a fresh key's pre-granted dispatch live
    and dies at ``failpoint``; a successor starts at once. The key's receipt, the seconds
    from its submit to the receipt, and the submit's wall time."""
    doomed = connector(stack, sandbox, failpoint)
    wait_until(lambda: owns_all(doomed, stack.settings.partitions), 60, "the assignment")
    key = f"acme/refund/{uuid.uuid4().hex[:10]}"
    submitted = time.time()
    stack.submit(key, ARGS, "sandbox")
    assert doomed.popen.wait(60) == -9, doomed.tail()
    successor = connector(stack, sandbox)
    receipt = stack.await_key(key, SUCCEEDED, timeout_s=PREGRANT_S + 60)
    took = time.time() - submitted
    assert successor.alive()
    # The fence: the dead connector committed past the pre-granted record, so its
    # successor started after it.
    (partition, offset, first), *later = dispatch_records(stack, key)
    assert isinstance(first, ev.Dispatch) and first.lease_until_ms > 0
    assert committed(stack, partition) > offset
    return key, receipt, took, submitted, later


def paid_once(sandbox: SandboxProc, key: str, receipt: ev.Receipt) -> dict[str, Any]:
    """The sandbox's one request and one effect for ``key`` (its own log), the effect the
    receipt names; the request."""
    (request,) = [r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key]
    (effect,) = sandbox.effects(key)
    assert receipt.external_id == effect["id"]
    return request


def test_killed_before_its_fenced_claim_the_key_is_offered_plainly_at_the_pregrants_end(
        pregrant_stack: Stack, sandbox: SandboxProc):
    stack = pregrant_stack
    key, receipt, took, submitted, later = killed_after_its_fence(stack, sandbox,
                                                                  "before_claim")
    # Paid once, by the successor, after the pre-grant ran out: nobody called under it.
    request = paid_once(sandbox, key, receipt)
    print(f"paid {request['at'] - submitted:.1f} s, receipted {took:.1f} s after the submit")
    assert PREGRANT_S - 1 <= request["at"] - submitted <= PREGRANT_S + SKEW_S + ROUND_S
    assert took <= PREGRANT_S + SKEW_S + ROUND_S, took
    # The processor's plain copy of the Dispatch (same id), claimed plainly.
    copies = [e for _, _, e in later if isinstance(e, ev.Dispatch)]
    assert copies and {c.lease_until_ms for c in copies} == {0}
    claims = claims_of(stack, key)
    assert [c.fenced for c in claims] == [False] and request["attempt_id"] == claims[0].claim_id
    assert ev.AlertKind.STALLED not in alerts_of(stack, key)  # the copy needs none


def test_killed_after_its_call_the_fenced_holder_is_reconciled_at_its_leases_end(
        pregrant_stack: Stack, sandbox: SandboxProc):
    stack = pregrant_stack
    # before_outcome: the target answered (the HTTP target's own I/O), nothing reported.
    key, receipt, took, submitted, later = killed_after_its_fence(stack, sandbox,
                                                                  "before_outcome")
    request = paid_once(sandbox, key, receipt)
    assert request["at"] - submitted < PREGRANT_S  # the fencer called, under the pre-grant
    (claim,) = claims_of(stack, key)
    assert claim.fenced and request["attempt_id"] == claim.claim_id
    # Settled by the processor's reconciliation at the lease's end plus the skew (a lookup
    # that found the payment), not by a second call.
    reconciles = [e for _, _, e in later if isinstance(e, ev.Reconcile)]
    assert [r.claim_id for r in reconciles] == ["timer"]
    print(f"paid {request['at'] - submitted:.1f} s, receipted {took:.1f} s after the submit")
    assert PREGRANT_S - 1 <= took <= PREGRANT_S + SKEW_S + ROUND_S, took
    # (The lookup's find, at a target that does not deduplicate, also asks an operator to
    # look, as for any holder reconciled: domain/effects.py. It is no duplicate.)
    assert ev.AlertKind.DUPLICATE_EFFECT not in alerts_of(stack, key)

