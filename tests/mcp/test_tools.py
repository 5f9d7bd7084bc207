"""LedgerTools' answers for the cases the broker tests cannot time: a fake client behind
the LedgerClient interface (unit tests only; tests/mcp/test_mcp_server.py is the real path)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.mcp.effects import parse_effects
from ledger_stream.mcp.server import LedgerTools
from ledger_stream.sdk.client import LedgerClient


class SilentLedger:
    """Takes every intent, answers none within the wait; ``status`` knows ``known``."""

    def __init__(self, known: ev.Receipt | None = None) -> None:
        self.known = known
        self.submitted: list[ev.Intent] = []

    def intent(self, *args: Any, **kwargs: Any) -> ev.Intent:
        return LedgerClient.intent(self, *args, **kwargs)  # type: ignore[arg-type]

    def submit(self, intent: ev.Intent, wait: float = 30.0, *,
               raise_errors: bool = True) -> ev.Receipt:
        self.submitted.append(intent)
        raise TimeoutError("no receipt")

    def status(self, key: str, wait: float = 2.0) -> ev.Receipt | None:
        return self.known


def tools(client: Any) -> LedgerTools:
    return LedgerTools(client, "acme", parse_effects("refund=refund@payments"))


def test_a_submit_not_answered_yet_says_hold() -> None:
    client = SilentLedger()
    answer = tools(client).submit("refund", "inv-1", {"amount": 1}, 0, "s1")
    assert len(client.submitted) == 1
    assert (answer.found, answer.resolved, answer.hold_downstream) == (False, False, True)


def test_an_operation_never_submitted_has_nothing_to_hold() -> None:
    answer = tools(SilentLedger()).get("refund", "inv-1")
    assert (answer.found, answer.resolved, answer.hold_downstream) == (False, False, False)


@pytest.mark.parametrize("status,resolved", [
    (ev.ReceiptStatus.SUCCEEDED, True), (ev.ReceiptStatus.REJECTED, True),
    (ev.ReceiptStatus.FAILED, True), (ev.ReceiptStatus.HELD, False),
    (ev.ReceiptStatus.ACCEPTED, False), (ev.ReceiptStatus.RECONCILING, False),
    (ev.ReceiptStatus.NEEDS_RECONCILIATION, False)])
def test_resolved_only_once_settled(status: ev.ReceiptStatus, resolved: bool) -> None:
    receipt = ev.Receipt(receipt_id="r", key="acme/refund/inv-1", intent_event_id="i",
                         status=status, reason=ev.Reason.NONE, args_hash="0" * 64,
                         attempts=1, at_ms=1, external_id="", key_status=status)
    answer = tools(SilentLedger(receipt)).get("refund", "inv-1")
    assert (answer.found, answer.resolved, answer.hold_downstream) == (
        True, resolved, not resolved)
    assert answer.external_id is None  # empty ids are absent, not ""


def test_the_tenant_comes_from_the_server_not_the_caller() -> None:
    client = SilentLedger()
    tools(client).submit("refund", "inv-9", {"tenant": "other"}, 0, "s1")
    assert client.submitted[0].key == "acme/refund/inv-9"
    assert client.submitted[0].tenant == "acme"
