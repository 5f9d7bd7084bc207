"""Effects watched at the target, end to end on the real broker: ``ledger-stream watch``
reads the payments sandbox's own ledger. A refund the ledger applied raises nothing; a
second payment for the same invoice made around the ledger (its own idempotency key) raises
``effect_without_intent`` under that refund's key and leaves the key as the ledger settled
it; a payment made under an operation key no intent reserved raises it through the
processor; one that maps to no key an ``unmapped`` alert: within seconds, with no connector
seeing them."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest

from ledger_lab.harness.processes import Proc
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.domain import events as ev
from ledger_stream.kafka.reader import read_topic

pytestmark = pytest.mark.timeout(180)


def pay_around_the_ledger(sandbox: SandboxProc, body: dict, key: str = "") -> str:
    request = urllib.request.Request(
        sandbox.url + "/v1/payments", method="POST", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 "Idempotency-Key": key or f"bypass-{uuid.uuid4().hex}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.load(response)["id"])


def alerts(stack: Stack) -> list[ev.Alert]:
    return [a for a in read_topic(stack.bootstrap, stack.settings.topic("alerts"))
            if isinstance(a, ev.Alert)]


def await_alert(stack: Stack, key: str, kind: ev.AlertKind, timeout_s: float = 30) -> ev.Alert:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [a for a in alerts(stack) if a.key == key and a.kind is kind]
        if found:
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"no {kind.value} alert for {key}: {alerts(stack)}")


def test_effects_made_around_the_ledger_raise_alerts_within_seconds(
        stack: Stack, sandbox: SandboxProc) -> None:
    stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url, "--deduplicates")
    watcher = Proc(["watch", "sandbox", "--name", "sandbox", "--base-url", sandbox.url,
                    "--interval", "0.5",
                    "--key-template", "acme/refund/{invoice}", "--bootstrap", stack.bootstrap,
                    "--topic-prefix", stack.settings.topic_prefix],
                   stack.tmp / "watch.log")
    stack.procs.append(watcher)
    run = uuid.uuid4().hex[:6]
    paid, never = f"inv-{run}-1", f"inv-{run}-2"
    args = {"invoice": paid, "amount": 42, "currency": "EUR"}
    stack.submit(f"acme/refund/{paid}", args, "sandbox")
    receipt = stack.await_key(f"acme/refund/{paid}", {ev.ReceiptStatus.SUCCEEDED})

    second = pay_around_the_ledger(sandbox, args)  # the same refund, paid again directly
    around = await_alert(stack, f"acme/refund/{paid}", ev.AlertKind.EFFECT_WITHOUT_INTENT)
    assert second in around.detail

    stray = pay_around_the_ledger(sandbox, {"invoice": never, "amount": 7},
                                  key=f"acme/refund/{never}")  # a real key, never asked for
    await_alert(stack, f"acme/refund/{never}", ev.AlertKind.EFFECT_WITHOUT_INTENT)
    pay_around_the_ledger(sandbox, {"amount": 7})  # no invoice: no key to name
    deadline = time.monotonic() + 30
    while not [a for a in alerts(stack) if a.key.startswith("unmapped/sandbox/")]:
        assert time.monotonic() < deadline, "no unmapped alert"
        time.sleep(0.5)

    # The ledger's own effect raised nothing, and the key stays as the ledger settled it.
    assert not [a for a in alerts(stack) if a.key == f"acme/refund/{paid}"
                and a.kind is not ev.AlertKind.EFFECT_WITHOUT_INTENT]
    latest = stack.receipts(f"acme/refund/{paid}")[-1]
    assert (latest.key_status, latest.external_id) == (ev.ReceiptStatus.SUCCEEDED,
                                                       receipt.external_id)
    assert stray != second
    assert watcher.stop(15) == 0, watcher.tail()
