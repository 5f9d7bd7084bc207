"""The pre-grant in a rolling upgrade, on the real broker, the real processor (exactly once,
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
from ledger_stream.kafka.reader import read_topic

pytestmark = pytest.mark.timeout(240)

ARGS = {"amount": 700, "currency": "EUR", "to": "cust-3"}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}


@pytest.fixture
def pregrant_stack(ledger_topics: Settings, tmp_path) -> Iterator[Stack]:
    """A processor pre-granting for 8 s, writing the current schemas (its upgrade done)."""
    s = Stack(ledger_topics, tmp_path, processor_env={"LEDGER_PREGRANT_LEASE_MS": "8000"})
    try:
        yield s
    finally:
        s.close()


def test_a_connector_writing_older_schemas_calls_only_on_a_grant(
        pregrant_stack: Stack, sandbox: SandboxProc):
    stack = pregrant_stack
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
