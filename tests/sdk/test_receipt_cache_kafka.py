"""The client's receipt cache on the real broker, processor, HTTP connector and payments
sandbox: a duplicate of a key the client created and saw succeed is answered at once, with
the receipt the processor writes for it (every field but the time), and its intent is still
recorded; every case the cache must not answer goes through the processor."""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict

import pytest

from ledger_lab.harness.processes import processor_group
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream import LedgerClient
from ledger_stream.cli.main import main
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(300)
WORKFLOW = ev.Workflow("billing-bot", "1", "t-1", "refund")
ARGS = {"amount": 4200, "currency": "EUR"}


def _settled(client: LedgerClient, key: str, args: object = ARGS) -> ev.Intent:
    first = client.intent(key, "refund", "payments", args, workflow=WORKFLOW)
    got = client.submit(first, wait=60)
    assert (got.state, got.answer) == (ev.ReceiptStatus.SUCCEEDED, ev.Answer.CREATED)
    return first


def _again(client: LedgerClient, key: str, args: object = ARGS, wait: float = 60
           ) -> tuple[ev.Intent, ev.Receipt, bool]:
    """(intent, its answer, whether the cache gave it)."""
    assert client.receipt_cache is not None
    hits = client.receipt_cache.hits
    intent = client.intent(key, "refund", "payments", args, workflow=WORKFLOW)
    answer = client.submit(intent, wait=wait, raise_errors=False)
    return intent, answer, client.receipt_cache.hits > hits


def _processors_answer(stack: Stack, intent: ev.Intent) -> ev.Receipt:
    stack.await_answer(intent)
    (found,) = [r for r in stack.receipts(intent.key) if r.intent_event_id == intent.event_id]
    return found


def _but_time(receipt: ev.Receipt) -> dict[str, object]:
    return {**asdict(receipt), "at_ms": None}


def test_a_cached_answer_is_the_one_the_processor_writes_and_the_intent_is_recorded(
        stack: Stack, sandbox: SandboxProc) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
    key = f"acme/refund/{uuid.uuid4().hex[:10]}"
    with LedgerClient(stack.settings) as client:
        first = _settled(client, key)
        repeat, cached, from_cache = _again(client, key)
        assert from_cache
        assert (cached.state, cached.answer) == (ev.ReceiptStatus.SUCCEEDED,
                                                 ev.Answer.ALREADY_DONE)
        assert cached.effect_intent_id == first.event_id
    # The intent went to the ledger anyway: the processor answered it, the same way.
    assert _but_time(_processors_answer(stack, repeat)) == _but_time(cached)
    uncached = stack.settings.model_copy(update={"sdk_receipt_cache": False})
    with LedgerClient(uncached) as plain:
        assert plain.receipt_cache is None
        other = plain.intent(key, "refund", "payments", ARGS, workflow=WORKFLOW)
        through = plain.submit(other, wait=60)
    assert _but_time(through) == _but_time(_processors_answer(stack, other))
    assert len(sandbox.effects(key)) == 1


def test_what_the_cache_must_not_answer_goes_through_the_processor(
        stack: Stack, sandbox: SandboxProc, capsys: pytest.CaptureFixture[str]) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
    run = uuid.uuid4().hex[:8]
    with LedgerClient(stack.settings) as client:
        key = f"acme/refund/{run}-a"
        _settled(client, key)
        # Other arguments: the ledger's conflict, not the cached success.
        _, conflict, from_cache = _again(client, key, {**ARGS, "amount": 1})
        assert not from_cache
        assert (conflict.status, conflict.reason) == (ev.ReceiptStatus.REJECTED,
                                                      ev.Reason.CONFLICT)
        # Not final: a key still pending (no connector for its target).
        pending_key = f"acme/refund/{run}-p"
        first = client.intent(pending_key, "refund", "nowhere", ARGS, workflow=WORKFLOW)
        assert client.submit(first, wait=5).state is ev.ReceiptStatus.ACCEPTED
        again = client.intent(pending_key, "refund", "nowhere", ARGS, workflow=WORKFLOW)
        hits = client.receipt_cache.hits if client.receipt_cache else -1
        assert client.submit(again, wait=5).answer is ev.Answer.PENDING
        assert client.receipt_cache is not None and client.receipt_cache.hits == hits
        # A freeze seen for the action: its settled keys go through the processor too.
        frozen_key = f"acme/refund/{run}-f"
        _settled(client, frozen_key)
        assert main(["freeze", "refund", "--tenant", "acme", "--reason", "incident",
                     "--operator", "ops-ann", "--bootstrap", stack.bootstrap,
                     "--topic-prefix", stack.settings.topic_prefix,
                     "--group", processor_group(stack.settings)]) == 0
        _, held, _ = _again(client, f"acme/refund/{run}-new")
        assert (held.status, held.reason) == (ev.ReceiptStatus.HELD, ev.Reason.FROZEN)
        _, answer, from_cache = _again(client, frozen_key)
        assert not from_cache and answer.answer is ev.Answer.ALREADY_DONE
    capsys.readouterr()


def test_a_key_settled_longer_ago_than_the_ttl_goes_through_the_processor(
        stack: Stack, sandbox: SandboxProc) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
    short = stack.settings.model_copy(update={"sdk_receipt_cache_ttl_s": 1.0})
    key = f"acme/refund/{uuid.uuid4().hex[:10]}"
    with LedgerClient(short) as client:
        _settled(client, key)
        time.sleep(1.2)
        _, answer, from_cache = _again(client, key)
        assert not from_cache and answer.answer is ev.Answer.ALREADY_DONE
