"""The SDK against the whole stack: processor, HTTP connector, payments sandbox."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_lab.harness.approvers import TEST_APPROVER
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream import (
    ApprovalError,
    AsyncLedgerClient,
    ConflictError,
    LedgerClient,
    ReceiptStatus,
    Workflow,
    operation_key,
    sign_approval,
)
from ledger_stream.config import Settings

pytestmark = pytest.mark.timeout(120)

WORKFLOW = Workflow("refund-agent", "1.0", "thread-1", "refund")
ARGS = {"invoice": "inv-1", "amount": 125.0, "currency": "EUR"}


@pytest.fixture
def ledger(ledger_topics: Settings, tmp_path: Path, sandbox: SandboxProc
           ) -> Iterator[tuple[LedgerClient, SandboxProc, Stack]]:
    stack = Stack(ledger_topics, tmp_path)
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                    "--deduplicates")
    client = LedgerClient(ledger_topics)
    try:
        yield client, sandbox, stack
    finally:
        client.close()
        stack.close()


def key() -> str:
    return operation_key("acme", "refund", uuid.uuid4().hex[:8])


def test_submit_returns_the_terminal_receipt_and_duplicates_the_original(ledger):
    client, sandbox, _ = ledger
    k = key()
    first = client.submit(client.intent(k, "refund", "payments", ARGS, workflow=WORKFLOW))
    assert first.status is ReceiptStatus.SUCCEEDED and first.external_id
    again = client.submit(client.intent(k, "refund", "payments", dict(ARGS), workflow=WORKFLOW))
    assert (again.status, again.external_id) == (ReceiptStatus.SUCCEEDED, first.external_id)
    assert [e["id"] for e in sandbox.effects(k)] == [first.external_id]
    status = client.status(k)
    assert status is not None and status.key_status is ReceiptStatus.SUCCEEDED


def test_conflicting_arguments_raise_and_apply_nothing(ledger):
    client, sandbox, _ = ledger
    k = key()
    client.submit(client.intent(k, "refund", "payments", ARGS, workflow=WORKFLOW))
    with pytest.raises(ConflictError) as raised:
        client.submit(client.intent(k, "refund", "payments", {**ARGS, "amount": 900},
                                    workflow=WORKFLOW))
    assert raised.value.receipt.key_status is ReceiptStatus.SUCCEEDED
    assert len(sandbox.effects(k)) == 1


def test_wait_runs_out_with_the_pending_receipt(ledger_topics: Settings, tmp_path: Path):
    stack = Stack(ledger_topics, tmp_path)  # no connector: nobody applies the effect
    try:
        with LedgerClient(ledger_topics) as client:
            receipt = client.submit(client.intent(key(), "refund", "payments", ARGS,
                                                  workflow=WORKFLOW), wait=8)
        assert receipt.status is ReceiptStatus.ACCEPTED
    finally:
        stack.close()


def test_async_client(ledger):
    _, sandbox, stack = ledger

    async def run() -> None:
        client = AsyncLedgerClient(stack.settings)
        k = key()
        receipts = await asyncio.gather(*(
            client.submit(client.intent(k, "refund", "payments", ARGS, workflow=WORKFLOW))
            for _ in range(3)))
        assert {r.external_id for r in receipts} == {receipts[0].external_id}
        assert len(sandbox.effects(k)) == 1
        await client.close()

    asyncio.run(run())


def test_approval_is_bound_to_the_arguments(ledger_topics: Settings, tmp_path: Path,
                                            sandbox: SandboxProc, monkeypatch):
    monkeypatch.setenv("LEDGER_APPROVAL_REQUIRED_ACTIONS", '["payout"]')
    # The processor trusts TEST_APPROVER's public key (LEDGER_APPROVAL_PUBLIC_KEYS, conftest).
    stack = Stack(ledger_topics, tmp_path)
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                    "--deduplicates")
    try:
        with LedgerClient(ledger_topics) as client:
            k = operation_key("acme", "payout", uuid.uuid4().hex[:8])
            approved = client.intent(k, "payout", "payments", ARGS, workflow=WORKFLOW)
            approval = sign_approval(TEST_APPROVER, k, "ap-1", approved.args_hash, "",
                                     approved.at_ms + 60_000)
            tampered = client.intent(k, "payout", "payments", {**ARGS, "amount": 9000},
                                     workflow=WORKFLOW, approval=approval)
            with pytest.raises(ApprovalError):
                client.submit(tampered)
            assert sandbox.effects(k) == []
            ok = client.intent(k, "payout", "payments", ARGS, workflow=WORKFLOW,
                               approval=approval)
            assert client.submit(ok).status is ReceiptStatus.SUCCEEDED
            assert len(sandbox.effects(k)) == 1
    finally:
        stack.close()
