"""``submit`` returns the receipt as the answer to the submitted intent, on the real broker,
processor, HTTP connector and payments sandbox: a repeat that waited while the key was in
flight is told ``already_done`` when the key settles, never ``created``, though the receipt
that settled the key was written for the intent that holds it."""

from __future__ import annotations

import threading
import uuid

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream import LedgerClient
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(240)
WORKFLOW = ev.Workflow("billing-bot", "1", "t-1", "refund")
# The harness's 4 s lease leaves a grant 1 s to reach the connector after its claim (less the
# call, record margin and skew); a loaded machine takes longer, and every attempt is then
# withdrawn uncalled, the key going accepted/in_progress until the load passes. Nothing here
# is about leases: the default one.
ROOMY = {"LEDGER_CONNECTOR_LEASE_MS": "30000"}


def test_a_repeat_waiting_on_a_key_in_flight_reads_already_done(
        stack: Stack, sandbox: SandboxProc) -> None:
    key = f"acme/refund/{uuid.uuid4().hex[:10]}"
    args = {"amount": 4200, "currency": "EUR"}
    with LedgerClient(stack.settings) as client:
        first = client.intent(key, "refund", "payments", args, workflow=WORKFLOW)
        pending = client.submit(first, wait=8)  # no connector yet: the key stays in flight
        assert (pending.state, pending.answer) == (ev.ReceiptStatus.ACCEPTED,
                                                   ev.Answer.PENDING)
        repeat = client.intent(key, "refund", "payments", args, workflow=WORKFLOW)
        got: list[ev.Receipt | Exception] = []
        waiting = threading.Thread(target=_submit, args=(client, repeat, got))
        waiting.start()
        # The repeat's own answer (pending) is written before the connector exists: read
        # from the topic, not assumed after a sleep (a loaded machine can take longer).
        early = stack.await_answer(repeat, timeout_s=60)
        assert (early.state, early.answer) == (ev.ReceiptStatus.ACCEPTED, ev.Answer.PENDING)
        stack.connector("http", "--name", "payments", "--base-url", sandbox.url, env=ROOMY)
        waiting.join(120)
        (answer,) = got
        assert isinstance(answer, ev.Receipt), f"{answer!r}\n{_story(stack, key)}"
        assert (answer.state, answer.answer) == (ev.ReceiptStatus.SUCCEEDED,
                                                 ev.Answer.ALREADY_DONE), _story(stack, key)
        assert answer.intent_event_id == repeat.event_id
        assert answer.effect_intent_id == first.event_id
        mine = client.submit(first, wait=30)  # the first intent asked again
        assert (mine.state, mine.answer) == (ev.ReceiptStatus.SUCCEEDED, ev.Answer.CREATED)
        assert mine.external_id == answer.external_id
    (paid,) = sandbox.effects(key)
    assert paid["id"] == answer.external_id


def _submit(client: LedgerClient, intent: ev.Intent,
            got: list[ev.Receipt | Exception]) -> None:
    try:
        got.append(client.submit(intent, wait=90))
    except Exception as exc:  # noqa: BLE001 - asserted by the test, with the story
        got.append(exc)


def _story(stack: Stack, key: str) -> str:
    """What the ledger wrote for ``key`` and what its processes said: a failure shows
    whether the key never settled or a settled key's receipt was not read."""
    found = stack.receipts(key)
    rows = "\n".join(f"{r.intent_event_id[:8]} {r.status.value}/{r.key_status.value} "
                     f"attempt {r.attempts} {r.detail[:100]!r}" for r in found[-6:])
    logs = "\n".join(f"--- {p.log.name}\n{p.tail(8)}" for p in stack.procs)
    return f"{len(found)} receipts of {key}, the last:\n{rows}\n{logs}"
