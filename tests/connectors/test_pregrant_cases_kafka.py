"""The pre-grant on the real broker: in a rolling upgrade, and behind a record in flight.

On the real broker, the real processor (exactly once,
pre-granting, writing the current schemas) and the payments sandbox, declared not
deduplicating: a connector still writing the previous release's schemas
(``LEDGER_WRITE_SCHEMAS``) cannot say ``fenced`` in its claim (that release's AttemptClaim
has no such field), so the processor reads its claim as plain and holds it. Such a connector
must not take the pre-grant: it calls only on a Grant naming its claim. Calls are read from
the sandbox's own ledger (every request it received), answers from the dispatch topic."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.reader import read_topic

pytestmark = pytest.mark.timeout(240)

ARGS = {"amount": 700, "currency": "EUR", "to": "cust-3"}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}


def test_a_connector_writing_older_schemas_calls_only_on_a_grant(
        short_pregrant_stack: Stack, sandbox: SandboxProc):
    stack = short_pregrant_stack
    # No --deduplicates: a call the processor does not know of could be paid twice.
    conn = stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url,
                           env={"LEDGER_WRITE_SCHEMAS": "0.1.0"})
    deadline = time.monotonic() + 60
    while "partitions assigned" not in conn.tail(200) and time.monotonic() < deadline:
        time.sleep(0.1)
    key = f"acme/refund/{uuid.uuid4().hex[:10]}"
    stack.submit(key, ARGS, "sandbox")
    stack.await_key(key, SUCCEEDED, timeout_s=90)

    (request,) = [r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key]
    answers = [e for e in read_topic(stack.bootstrap, stack.settings.topic("dispatch"))
               if getattr(e, "key", None) == key]
    dispatch = next(e for e in answers if isinstance(e, ev.Dispatch))
    assert dispatch.lease_until_ms > 0  # the processor pre-granted attempt 1
    granted = {e.claim_id for e in answers if isinstance(e, ev.Grant)}
    # The call went out under a claim the processor granted (not one it held).
    assert request["attempt_id"] in granted, (request["attempt_id"], answers)
    assert conn.alive()


@pytest.fixture
def retry_stack(ledger_topics: Settings, tmp_path) -> Iterator[Stack]:
    """A processor pre-granting for 12 s whose retries wait 2 s (their Dispatch records
    hold their partition's commit point meanwhile)."""
    s = Stack(ledger_topics, tmp_path, processor_env={"LEDGER_PREGRANT_LEASE_MS": "12000",
                                                      "LEDGER_RETRY_BACKOFF_MS": "2000"})
    try:
        yield s
    finally:
        s.close()


def _key(partition: int, partitions: int) -> str:
    while True:
        key = f"acme/refund/{uuid.uuid4().hex[:10]}"
        if partition_for(key, partitions) == partition:
            return key


def test_a_pregrant_behind_a_retry_is_fenced_once_the_retry_is_done(
        retry_stack: Stack, sandbox: SandboxProc):
    """Key a's first call is answered 503 (declared not applied): its attempt 2 waits 2 s
    in the partition. Key b, fresh behind it in the same partition, waits for the commit
    point and is fenced when a's retry is handled; its record is past a transaction
    marker (the exactly-once processor's dispatch partition has one after each
    transaction), which must not hide the commit point reaching it."""
    stack = retry_stack
    conn = stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url,
                           "--not-applied-status", "503")
    deadline = time.monotonic() + 60
    while "partitions assigned" not in conn.tail(200) and time.monotonic() < deadline:
        time.sleep(0.1)
    partitions = stack.settings.partitions
    a, b = _key(0, partitions), _key(0, partitions)
    sandbox.set_fault("error_before_commit", key=a)
    stack.submit(a, ARGS, "sandbox")
    deadline = time.monotonic() + 30
    while not [r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == a]:
        assert time.monotonic() < deadline, "a was never called"
        time.sleep(0.05)
    time.sleep(0.3)  # a's attempt 2 is dispatched, waiting for its backoff
    stack.submit(b, ARGS, "sandbox")
    stack.await_key(a, SUCCEEDED, timeout_s=60)
    stack.await_key(b, SUCCEEDED, timeout_s=60)

    claims = [e for e in read_topic(stack.bootstrap, stack.settings.topic("attempts"))
              if isinstance(e, ev.AttemptClaim) and e.key == b]
    # b was fenced (no plain claim held until its pre-grant's end), and called once.
    assert [c.fenced for c in claims] == [True], claims
    assert len([r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == b]) == 1
    assert conn.alive()
