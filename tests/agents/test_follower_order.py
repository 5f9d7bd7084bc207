"""The receipt follower (langgraph/follower.py) against a fake consumer and a fake graph (no
broker): it reads the intents and receipts topics in no order across each other, so a
follower started after a key settled may read the final receipt before the intent naming
the thread. It once missed that thread for good (test_refund_agent's follower test failed 3
runs in 3 on a quick machine, 2026-12-05)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.values import replace
from ledger_stream.langgraph import follower as follower_module
from ledger_stream.langgraph.follower import ReceiptFollower
from ledger_stream.serde import AvroCodec

KEY = "acme/refund/inv-9"
CODEC = AvroCodec()


class FakeConsumer:
    def __init__(self, config: dict[str, Any]) -> None:
        self.records: list[Any] = []

    def subscribe(self, topics: list[str]) -> None:
        pass

    def poll(self, timeout: float) -> Any:
        return self.records.pop(0) if self.records else None

    def consume(self, n: int, timeout: float) -> list[Any]:
        taken, self.records = self.records[:n], self.records[n:]
        return taken

    def close(self) -> None:
        pass


class FakeGraph:
    """Thread states: thread id -> {"ledger_receipts": {key: summary}}."""

    def __init__(self) -> None:
        self.states: dict[str, dict[str, Any]] = {}

    def get_state(self, config: dict[str, Any]) -> Any:
        return SimpleNamespace(values=self.states[config["configurable"]["thread_id"]])

    def update_state(self, config: dict[str, Any], values: dict[str, Any]) -> None:
        state = self.states[config["configurable"]["thread_id"]]
        state["ledger_receipts"] = {**state["ledger_receipts"], **values["ledger_receipts"]}


def message(event: Any) -> Any:
    value = CODEC.encode(event)
    return SimpleNamespace(error=lambda: None, value=lambda: value)


def intent(thread_id: str) -> ev.Intent:
    return ev.Intent(event_id=uuid.uuid4().hex, key=KEY, tenant="acme", action="refund",
                     target="payments", args_json="{}", args_hash="h",
                     workflow=ev.Workflow(graph="g", version="1", thread_id=thread_id,
                                          node="n"), at_ms=1)


def receipt(intent_id: str, status: ev.ReceiptStatus) -> ev.Receipt:
    return ev.Receipt(receipt_id=uuid.uuid4().hex, key=KEY, intent_event_id=intent_id,
                      status=status, reason=ev.Reason.NONE, args_hash="h", attempts=1,
                      at_ms=1, key_status=status)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[ReceiptFollower, FakeConsumer, FakeGraph]:
    monkeypatch.setattr(follower_module, "Consumer", FakeConsumer)
    graph = FakeGraph()
    graph.states["t-1"] = {"ledger_receipts": {KEY: {"status": "accepted"}}}
    follower = ReceiptFollower(Settings(kafka_bootstrap="127.0.0.1:1"), "127.0.0.1:1", graph)
    return follower, follower._consumer, graph  # type: ignore[return-value]


@pytest.mark.parametrize("receipt_first", [True, False])
def test_a_thread_is_settled_whichever_topic_is_read_first(world, receipt_first) -> None:
    follower, consumer, graph = world
    asked = intent("t-1")
    final = receipt(asked.event_id, ev.ReceiptStatus.SUCCEEDED)
    records = [message(final), message(asked)] if receipt_first else [
        message(asked), message(final)]
    consumer.records = records
    assert follower.poll(0) == 1
    assert graph.states["t-1"]["ledger_receipts"][KEY]["status"] == "succeeded"


def test_a_pending_receipt_read_first_settles_nothing(world) -> None:
    follower, consumer, graph = world
    asked = intent("t-1")
    consumer.records = [message(receipt(asked.event_id, ev.ReceiptStatus.IN_PROGRESS)),
                        message(asked)]
    assert follower.poll(0) == 0
    assert graph.states["t-1"]["ledger_receipts"][KEY]["status"] == "accepted"


def test_the_kept_final_receipts_are_bounded(world, monkeypatch: pytest.MonkeyPatch) -> None:
    follower, consumer, _ = world
    monkeypatch.setattr(follower_module, "SETTLED_KEPT", 2)
    for n in range(3):
        follower._remember(ev.Receipt(
            receipt_id=str(n), key=f"acme/refund/inv-{n}", intent_event_id="i",
            status=ev.ReceiptStatus.SUCCEEDED, reason=ev.Reason.NONE, args_hash="h",
            attempts=1, at_ms=1, key_status=ev.ReceiptStatus.SUCCEEDED))
    assert list(follower._settled) == ["acme/refund/inv-1", "acme/refund/inv-2"]


def test_a_kept_rejection_never_settles_a_later_intents_thread(world) -> None:
    # A rejection (no approval) leaves the key holding no effect; the thread that asked
    # again, approved, must wait for its own answer, not take the earlier rejection.
    follower, consumer, graph = world
    first, again = intent("t-0"), intent("t-1")
    graph.states["t-0"] = {"ledger_receipts": {KEY: {"status": "rejected"}}}
    consumer.records = [message(first),
                        message(receipt(first.event_id, ev.ReceiptStatus.REJECTED)),
                        message(again)]
    assert follower.poll(0) == 0
    assert graph.states["t-1"]["ledger_receipts"][KEY]["status"] == "accepted"


def test_a_thread_whose_intent_was_a_repeat_is_settled_as_already_done(world) -> None:
    follower, consumer, graph = world
    first, repeat = intent("t-0"), intent("t-1")
    # t-1 holds its own pending answer; the key settles for the intent that holds it.
    graph.states["t-1"]["ledger_receipts"][KEY] = {"status": "accepted",
                                                   "intent_event_id": repeat.event_id}
    settled = replace(receipt(first.event_id, ev.ReceiptStatus.SUCCEEDED),
                      effect_intent_id=first.event_id)
    consumer.records = [message(repeat), message(settled)]
    assert follower.poll(0) == 1
    held = graph.states["t-1"]["ledger_receipts"][KEY]
    assert (held["state"], held["answer"], held["intent_event_id"]) == (
        "succeeded", "already_done", repeat.event_id)
