"""The HTTP connector against the payments sandbox, with the processor, on the real broker.

Every assertion about effects reads the sandbox's own ledger, never the agent's view.
"""

from __future__ import annotations

import uuid

import pytest

from connectors.http import HttpTarget
from ledger_lab.harness.processes import Proc
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import TERMINAL, Stack
from ledger_stream.domain import events as ev
from ledger_stream.testing.targets import DeduplicatingTargetContract

pytestmark = pytest.mark.timeout(180)

SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}


# The sandbox deduplicates by Idempotency-Key, so the connector may declare it; "grant-only"
# runs treat it as a target that does not (no declaration): the connector waits for every
# grant and never resends after a lookup found nothing.
MODES = {"fast-path": ("--deduplicates", "--fast-path"), "grant-only": ()}
DEDUP = ("--deduplicates",)


def http_connector(stack: Stack, sandbox: SandboxProc, *extra: str,
                   failpoint: str | None = None):
    return stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url, *extra,
                           failpoint=failpoint)


def new_key() -> str:
    return f"acme/refund/{uuid.uuid4().hex[:10]}"


ARGS = {"amount": 4200, "currency": "EUR", "to": "cust-7"}


# --- the contract, against the real sandbox -------------------------------------------------


class TestSandboxTarget(DeduplicatingTargetContract):
    @pytest.fixture
    def target(self, sandbox):
        return HttpTarget("sandbox", sandbox.url, deduplicates=True)

    @pytest.fixture
    def unreachable(self):
        return HttpTarget("sandbox", "http://127.0.0.1:9", deduplicates=True)

    def effects(self, target, key):
        return len([e for e in _ledger_of(target)["effects"] if e["idempotency_key"] == key])


def _ledger_of(target: HttpTarget) -> dict:
    import json
    import urllib.request

    with urllib.request.urlopen(target.base_url + "/v1/ledger", timeout=5) as response:
        return json.load(response)


# --- end to end ---------------------------------------------------------------------------


def test_each_key_applied_once_with_duplicates(stack: Stack, sandbox: SandboxProc):
    http_connector(stack, sandbox, *DEDUP)
    keys = [new_key() for _ in range(10)]
    for key in keys:
        stack.submit(key, ARGS, "sandbox")
        stack.submit(key, ARGS, "sandbox")  # a resumed worker's duplicate
    for key in keys:
        receipt = stack.await_key(key, SUCCEEDED)
        (effect,) = sandbox.effects(key)
        assert receipt.external_id == effect["id"]


@pytest.mark.parametrize("mode", ["fast-path", "grant-only"])
@pytest.mark.parametrize("failpoint", ["before_claim", "before_call", "after_call",
                                       "before_outcome", "after_outcome"])
def test_connector_killed_at_each_failpoint_then_restarted(stack, sandbox, failpoint, mode):
    # grant-only: the sandbox treated as a target without native deduplication, so the
    # connector waits for the grant and an unknown outcome is settled by a lookup.
    extra = MODES[mode]
    key = new_key()
    doomed = http_connector(stack, sandbox, *extra, failpoint=failpoint)
    stack.submit(key, ARGS, "sandbox")
    assert doomed.popen.wait(60) == -9, doomed.tail()
    http_connector(stack, sandbox, *extra)
    receipt = stack.await_key(key, TERMINAL, timeout_s=90)
    if (mode, failpoint) == ("grant-only", "before_call"):
        # Granted, killed before calling: the lookup finds nothing, and a target that does
        # not deduplicate never gets a blind resend. An operator decides.
        assert receipt.key_status is ev.ReceiptStatus.NEEDS_RECONCILIATION
        assert sandbox.effects(key) == []
        resolve = Proc(["reconcile", "resolve", key, "--not-applied", "--attempt",
                        str(receipt.attempts), "--reason", "not in the target's ledger",
                        "--bootstrap",
                        stack.bootstrap, "--topic-prefix", stack.settings.topic_prefix],
                       stack.tmp / "resolve.log")
        assert resolve.popen.wait(60) == 0, resolve.tail()
        receipt = stack.await_key(key, SUCCEEDED, timeout_s=60)
    effects = sandbox.effects(key)
    assert len(effects) == 1, effects
    assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED
    assert receipt.external_id == effects[0]["id"]
    attempt_ids = [r["attempt_id"] for r in sandbox.ledger()["requests"]
                   if r["idempotency_key"] == key]
    assert len(attempt_ids) == len(set(attempt_ids)), "each call carries a new attempt id"


def test_commit_then_drop_is_reconciled_by_key(stack, sandbox):
    key = new_key()
    sandbox.set_fault("commit_then_drop", key=key)
    http_connector(stack, sandbox)
    stack.submit(key, ARGS, "sandbox")
    receipt = stack.await_key(key, TERMINAL)
    (effect,) = sandbox.effects(key)
    assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED
    assert receipt.external_id == effect["id"]
    assert len([r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key]) == 1


def test_client_timeout_before_the_commit_is_reconciled_once(stack, sandbox):
    key = new_key()
    sandbox.set_fault("delay_before_commit", key=key, delay_s=3)
    http_connector(stack, sandbox, *DEDUP, "--lookup-delay", "4")
    stack.submit(key, ARGS, "sandbox")
    receipt = stack.await_key(key, TERMINAL)
    (effect,) = sandbox.effects(key)
    assert (receipt.key_status, receipt.external_id) == (ev.ReceiptStatus.SUCCEEDED,
                                                         effect["id"])


def test_target_restarted_mid_flight(stack, sandbox):
    key = new_key()
    sandbox.set_fault("crash_after_commit", key=key)
    http_connector(stack, sandbox)
    stack.submit(key, ARGS, "sandbox")
    assert sandbox.wait_exit(30) == 71
    sandbox.restart()
    receipt = stack.await_key(key, TERMINAL)
    (effect,) = sandbox.effects(key)
    assert (receipt.key_status, receipt.external_id) == (ev.ReceiptStatus.SUCCEEDED,
                                                         effect["id"])


def test_retryable_5xx_before_commit_is_retried_with_the_same_key(stack, sandbox):
    key = new_key()
    sandbox.set_fault("error_before_commit", key=key)
    # The sandbox documents its 503 as "not processed": declared, it is retried.
    http_connector(stack, sandbox, *DEDUP, "--not-applied-status", "503")
    stack.submit(key, ARGS, "sandbox")
    receipt = stack.await_key(key, TERMINAL)
    (effect,) = sandbox.effects(key)
    assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED and receipt.attempts == 2
    requests = [r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key]
    assert [r["result"] for r in requests] == ["fault:error_before_commit", "created"]
    assert len({r["attempt_id"] for r in requests}) == 2


@pytest.mark.parametrize("mode", ["fast-path", "grant-only"])
def test_two_connector_instances_on_one_dispatch_topic(stack, sandbox, mode):
    extra = MODES[mode]
    http_connector(stack, sandbox, *extra)
    http_connector(stack, sandbox, *extra)
    keys = [new_key() for _ in range(20)]
    for key in keys:
        stack.submit(key, ARGS, "sandbox")
    for key in keys:
        stack.await_key(key, SUCCEEDED)
        assert len(sandbox.effects(key)) == 1


def test_conflicting_arguments_never_reach_the_target(stack, sandbox):
    http_connector(stack, sandbox, *DEDUP)
    key = new_key()
    stack.submit(key, ARGS, "sandbox")
    stack.await_key(key, SUCCEEDED)
    conflicting = stack.submit(key, {**ARGS, "amount": 9999}, "sandbox")
    answer = stack.await_answer(conflicting)
    assert (answer.status, answer.reason) == (ev.ReceiptStatus.REJECTED, ev.Reason.CONFLICT)
    assert answer.key_status is ev.ReceiptStatus.SUCCEEDED
    requests = [r for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key]
    assert len(requests) == 1 and len(sandbox.effects(key)) == 1
