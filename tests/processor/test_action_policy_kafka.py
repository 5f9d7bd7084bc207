"""A per-action knob changes what happens end to end: the real broker, processor and
connector, and the payments sandbox as the target (its own ledger counts the effects).

Both actions go to the same deduplicating, queryable target, and both calls die with the
sandbox before it commits (the connector sees an unknown outcome; its lookup, once the
sandbox is back, finds nothing). The refund, under the ledger-wide policy, is tried again
and paid once. The email, set to one attempt in the config file, stops at
``needs_reconciliation`` for an operator, unsent, its receipt naming the policy revision."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(300)

ARGS = {"amount": 700, "currency": "EUR", "to": "cust-3"}
POLICY_FILE = "[actions.send_email]\nmax_attempts = 1\n"


def _lost_call(stack: Stack, sandbox: SandboxProc, key: str) -> None:
    """Submit ``key`` with the sandbox set to die before committing its call; bring the
    sandbox back once it has died, so the connector's lookup gets an answer."""
    sandbox.set_fault("crash_before_commit", key=key)
    stack.submit(key, ARGS, "sandbox")
    sandbox.wait_exit(60)
    sandbox.restart()


def test_one_attempt_for_email_needs_an_operator_while_a_refund_is_retried(
        ledger_topics: Settings, sandbox: SandboxProc, tmp_path: Path):
    config = tmp_path / "ledger.toml"
    config.write_text(POLICY_FILE)
    stack = Stack(ledger_topics, tmp_path, processor_env={"LEDGER_CONFIG": str(config)})
    try:
        stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url,
                        "--deduplicates")
        email, refund = "acme/send_email/welcome-1", "acme/refund/inv-1"

        _lost_call(stack, sandbox, email)
        waiting = stack.await_key(email, {ev.ReceiptStatus.NEEDS_RECONCILIATION,
                                          ev.ReceiptStatus.SUCCEEDED}, timeout_s=120)
        assert waiting.key_status is ev.ReceiptStatus.NEEDS_RECONCILIATION, waiting
        assert "1 attempts used" in waiting.detail and "for send_email" in waiting.detail
        assert sandbox.effects(email) == []  # never sent, never resent

        _lost_call(stack, sandbox, refund)
        paid = stack.await_key(refund, {ev.ReceiptStatus.NEEDS_RECONCILIATION,
                                        ev.ReceiptStatus.SUCCEEDED}, timeout_s=120)
        assert paid.key_status is ev.ReceiptStatus.SUCCEEDED, paid
        (effect,) = sandbox.effects(refund)
        assert paid.external_id == effect["id"] and paid.attempts == 2
        assert "decision policy p-" in stack.processor.tail(400)
        assert "send_email: max_attempts 1" in stack.processor.tail(400)
    finally:
        stack.close()
