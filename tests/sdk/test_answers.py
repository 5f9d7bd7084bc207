"""``submit`` returns the receipt as the answer to the submitted intent, on the real broker,
processor, HTTP connector and payments sandbox: a repeat that waited while the key was in
flight is told ``already_done`` when the key settles, never ``created``, though the receipt
that settled the key was written for the intent that holds it."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream import LedgerClient
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(240)
WORKFLOW = ev.Workflow("billing-bot", "1", "t-1", "refund")


def test_a_repeat_waiting_on_a_key_in_flight_reads_already_done(
        stack: Stack, sandbox: SandboxProc) -> None:
    key = f"acme/refund/{uuid.uuid4().hex[:10]}"
    args = {"amount": 4200, "currency": "EUR"}
    with LedgerClient(stack.settings) as client:
        first = client.intent(key, "refund", "payments", args, workflow=WORKFLOW)
        pending = client.submit(first, wait=30)  # no connector yet: the key stays in flight
        assert (pending.state, pending.answer) == (ev.ReceiptStatus.ACCEPTED,
                                                   ev.Answer.PENDING)
        repeat = client.intent(key, "refund", "payments", args, workflow=WORKFLOW)
        got: list[ev.Receipt] = []
        waiting = threading.Thread(target=lambda: got.append(client.submit(repeat, wait=90)))
        waiting.start()
        time.sleep(3)  # the repeat's own answer (pending) comes first
        stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
        waiting.join(120)
        (answer,) = got
        assert (answer.state, answer.answer) == (ev.ReceiptStatus.SUCCEEDED,
                                                 ev.Answer.ALREADY_DONE)
        assert answer.intent_event_id == repeat.event_id
        assert answer.effect_intent_id == first.event_id
        mine = client.submit(first, wait=30)  # the first intent asked again
        assert (mine.state, mine.answer) == (ev.ReceiptStatus.SUCCEEDED, ev.Answer.CREATED)
        assert mine.external_id == answer.external_id
    (paid,) = sandbox.effects(key)
    assert paid["id"] == answer.external_id
