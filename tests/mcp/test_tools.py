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
    return LedgerTools(client, "acme", parse_effects("refund=refund@payments[invoice]"))


def test_a_submit_not_answered_yet_says_hold() -> None:
    client = SilentLedger()
    answer = tools(client).submit("refund", {"invoice": "inv-1", "amount": 1}, 0, "s1")
    assert len(client.submitted) == 1
    assert (answer.found, answer.resolved, answer.hold_downstream) == (False, False, True)


def test_an_operation_never_submitted_has_nothing_to_hold() -> None:
    answer = tools(SilentLedger()).get("refund", {"invoice": "inv-1"})
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
    answer = tools(SilentLedger(receipt)).get("refund", {"invoice": "inv-1"})
    assert (answer.found, answer.resolved, answer.hold_downstream) == (
        True, resolved, not resolved)
    assert answer.external_id is None  # empty ids are absent, not ""


def test_the_tenant_comes_from_the_server_not_the_caller() -> None:
    client = SilentLedger()
    tools(client).submit("refund", {"invoice": "inv-9", "tenant": "other"}, 0, "s1")
    assert client.submitted[0].key == "acme/refund/inv-9"
    assert client.submitted[0].tenant == "acme"


def test_an_operation_in_flight_stays_unresolved_after_another_callers_conflict() -> None:
    from ledger_stream.testing.ledger import DecideLedger

    t = tools(DecideLedger())
    first = t.submit("refund", {"invoice": "inv-1", "amount": 10}, 1, "host-a")
    assert (first.status, first.resolved) == ("accepted", False)
    other = t.submit("refund", {"invoice": "inv-1", "amount": 11}, 1, "host-b")
    assert (other.status, other.reason, other.resolved) == ("rejected", "conflict", True)
    now = t.get("refund", {"invoice": "inv-1"})  # the latest receipt is host-b's rejection
    assert (now.key_status, now.resolved, now.hold_downstream) == ("accepted", False, True)


INV1_10 = {"invoice": "inv-1", "amount": 10}
INV7_10 = {"invoice": "inv-7", "amount": 10}


def settled(args_hash: str) -> ev.Receipt:
    return ev.Receipt(receipt_id="r0", key="acme/refund/inv-1", intent_event_id="earlier",
                      status=ev.ReceiptStatus.SUCCEEDED, reason=ev.Reason.NONE,
                      args_hash=args_hash, attempts=1, at_ms=1, external_id="re_10",
                      key_status=ev.ReceiptStatus.SUCCEEDED)


def test_an_unanswered_submit_never_takes_another_intents_outcome() -> None:
    from ledger_stream.domain.keys import args_hash

    other = tools(SilentLedger(settled(args_hash(INV1_10))))
    answer = other.submit("refund", {"invoice": "inv-1", "amount": 250}, 0, "s")  # a conflict to be
    assert (answer.found, answer.resolved, answer.hold_downstream, answer.external_id) == (
        False, False, True, None)
    same = tools(SilentLedger(settled(args_hash(INV1_10))))
    answer = same.submit("refund", INV1_10, 0, "s")  # the original's repeat
    assert (answer.status, answer.resolved, answer.external_id) == ("succeeded", True, "re_10")


def test_an_unanswered_repeat_is_not_told_an_earlier_rejection_of_the_key() -> None:
    # Found by a hostile review (2026-12-05): the key's latest receipt was a rejection (an
    # approval freeze), so the key held no effect; the host repeated the call after the
    # unfreeze, its wait ran out, and it was told "rejected, resolved", while the ledger
    # then reserved the key and dispatched the effect.
    from ledger_stream.domain.keys import args_hash

    rejected = ev.Receipt(receipt_id="r0", key="acme/refund/inv-7", intent_event_id="earlier",
                          status=ev.ReceiptStatus.REJECTED, reason=ev.Reason.APPROVAL,
                          args_hash=args_hash(INV7_10), attempts=0, at_ms=1,
                          external_id="", key_status=ev.ReceiptStatus.REJECTED)
    answer = tools(SilentLedger(rejected)).submit("refund", INV7_10, 0, "s")
    assert (answer.found, answer.resolved, answer.hold_downstream) == (False, False, True)


def test_effects_sharing_an_action_are_refused() -> None:
    from ledger_stream.mcp.effects import EffectSpecError

    with pytest.raises(EffectSpecError, match="share the action"):
        parse_effects("refund=refund@payments[invoice],refund_eu=refund@payments-eu[invoice]")


def test_list_unresolved_reads_the_topic_with_the_clients_codec_and_skips_poison(
        ledger_topics: Any) -> None:
    """On the real broker: open and settled operations, one of another tenant, and a record
    that is not a receipt; only the tenant's open one is listed, the bad record counted."""
    from confluent_kafka import Producer

    from ledger_stream.kafka.producer import EventProducer

    def receipt(key: str, status: ev.ReceiptStatus) -> ev.Receipt:
        return ev.Receipt(receipt_id=key, key=key, intent_event_id="i", status=status,
                          reason=ev.Reason.NONE, args_hash="0" * 64, attempts=1, at_ms=1,
                          external_id="", key_status=status)

    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap)
    for key, status in (("acme/refund/open", ev.ReceiptStatus.IN_PROGRESS),
                        ("acme/refund/done", ev.ReceiptStatus.SUCCEEDED),
                        ("globex/refund/open", ev.ReceiptStatus.ACCEPTED)):
        producer.send("receipts", receipt(key, status))
    producer.flush()
    raw = Producer({"bootstrap.servers": ledger_topics.kafka_bootstrap})
    raw.produce(ledger_topics.topic("receipts"), b"not avro", key=b"acme/refund/x")
    raw.flush()
    with LedgerClient(ledger_topics) as client:
        listed = tools(client).unresolved()
    assert [o.key for o in listed.operations] == ["acme/refund/open"]
    assert (listed.count, listed.skipped) == (1, 1)


def _schemas(effects: str) -> dict[str, dict[str, Any]]:
    import asyncio

    from mcp import Client

    from ledger_stream.mcp.server import build_server

    async def listed() -> dict[str, dict[str, Any]]:
        server = build_server(LedgerTools(SilentLedger(), "acme", parse_effects(effects)), "s")
        async with Client(server) as client:
            return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    return asyncio.run(listed())


def test_the_tools_ask_for_no_operation_id_unless_an_effect_opts_in() -> None:
    keyed = _schemas("refund=refund@payments[invoice],ship=ship@warehouse[order,line]")
    for name in ("submit_effect", "get_operation"):
        assert "operation_id" not in keyed[name]["properties"]
        assert "arguments" in keyed[name]["required"]
    opted = _schemas("refund=refund@payments[invoice],note=add_note@crm[unsafe-model-id]")
    assert "operation_id" in opted["submit_effect"]["properties"]
    assert "operation_id" not in opted["submit_effect"]["required"]


def test_an_effect_keyed_by_arguments_ignores_a_model_id_an_opted_in_one_uses_it() -> None:
    client = SilentLedger()
    both = LedgerTools(client, "acme", parse_effects(
        "refund=refund@payments[invoice],note=add_note@crm[unsafe-model-id]"))
    for model_id in ("a-1", "b-2", None):
        both.submit("refund", {"invoice": "inv-3", "amount": 1}, 0, "s", model_id)
    both.submit("note", {"text": "hi"}, 0, "s", "n-1")
    assert [i.key for i in client.submitted] == ["acme/refund/inv-3"] * 3 + [
        "acme/add_note/n-1"]
    with pytest.raises(ValueError, match="takes its key from operation_id"):
        both.submit("note", {"text": "hi"}, 0, "s")


@pytest.mark.parametrize("answer,state,error", [
    ("rejected", "succeeded", True),  # a conflict on a key that succeeded
    ("created", "failed", True), ("already_done", "failed", True),  # the effect failed
    ("created", "succeeded", False), ("already_done", "succeeded", False),
    ("held", "held", False), ("pending", "accepted", False)])  # applied later, or not yet
def test_a_refused_or_failed_submit_is_a_tool_error(answer: str, state: str,
                                                    error: bool) -> None:
    from ledger_stream.mcp.server import Operation, refused

    op = Operation(found=True, effect="refund", business_id={}, key="acme/refund/inv-1",
                   state=state, answer=answer, resolved=True, hold_downstream=False)
    assert refused(op) is error
