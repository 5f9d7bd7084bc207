"""``ledger-stream api`` on the real broker, processor, HTTP connector and payments sandbox,
driven as a client in another language would: with curl, nothing but HTTP. Effects are
counted in the sandbox's own ledger. Tenants are isolated: a key of one tenant can neither
read nor write another tenant's operations."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_stream.kafka.local.ports import pick_free_ports
from ledger_stream.testing.processes import Proc
from ledger_stream.testing.sandbox import SandboxProc
from ledger_stream.testing.stack import Stack

pytestmark = pytest.mark.timeout(180)

ACME, GLOBEX = "acme-key-0123456789abcdef", "globex-key-0123456789abcdef"


@pytest.fixture
def gateway(stack: Stack, sandbox: SandboxProc, tmp_path: Path) -> Iterator[str]:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url, "--deduplicates")
    keys = tmp_path / "keys"
    keys.write_text(f"# tenant=key\nacme={ACME}\nglobex={GLOBEX}\n")
    (port,) = pick_free_ports(1)
    proc = Proc(["api", "--port", str(port), "--keys-file", str(keys), "--bootstrap",
                 stack.bootstrap, "--topic-prefix", stack.settings.topic_prefix],
                tmp_path / "api.log")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=2).close()
            break
        except OSError:
            assert proc.alive() and time.monotonic() < deadline, proc.tail()
            time.sleep(0.2)
    yield url
    assert proc.stop() == 0, proc.tail()


def curl(method: str, url: str, key: str | None = None, body: Any = None) -> tuple[int, Any]:
    """(HTTP status, JSON body) of one curl call."""
    command = ["curl", "-sS", "-X", method, "-w", "\n%{http_code}", url]
    if key is not None:
        command += ["-H", f"Authorization: Bearer {key}"]
    if body is not None:
        command += ["-H", "Content-Type: application/json", "--data", json.dumps(body)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    text, _, code = out.stdout.rpartition("\n")
    return int(code), json.loads(text) if text else None


def intent(key: str, amount: int = 4200, wait: float = 30) -> dict[str, Any]:
    return {"key": key, "action": "refund", "target": "payments",
            "args": {"amount": amount, "currency": "EUR"},
            "workflow": {"graph": "billing-bot", "version": "3.1", "thread_id": "t-9"},
            "wait_seconds": wait}


def new_key(tenant: str = "acme") -> str:
    return f"{tenant}/refund/{uuid.uuid4().hex[:10]}"


def test_submit_repeat_and_read_with_nothing_but_curl(gateway: str, sandbox: SandboxProc):
    key = new_key()
    code, first = curl("POST", f"{gateway}/v1/intents", ACME, intent(key))
    assert code == 200 and first["answered"], first
    assert first["operation"]["status"] == "succeeded" and first["operation"]["resolved"]
    code, again = curl("POST", f"{gateway}/v1/intents", ACME, intent(key))
    assert code == 200 and again["operation"]["status"] == "succeeded"
    assert again["operation"]["external_id"] == first["operation"]["external_id"]
    (effect,) = sandbox.effects(key)  # one payment, whatever the client repeats
    assert effect["id"] == first["operation"]["external_id"]

    code, other = curl("POST", f"{gateway}/v1/intents", ACME, intent(key, amount=1))
    assert code == 200 and (other["operation"]["status"], other["operation"]["reason"]) == (
        "rejected", "conflict")
    assert len(sandbox.effects(key)) == 1

    code, now = curl("GET", f"{gateway}/v1/operations/{key}", ACME)
    assert code == 200 and (now["key_status"], now["resolved"]) == ("succeeded", True)
    code, rows = curl("GET", f"{gateway}/v1/operations/{key}/timeline", ACME)
    assert code == 200 and [r["event"] for r in rows].count("Intent") == 3
    deadline = time.monotonic() + 20
    while True:
        code, alerts = curl("GET", f"{gateway}/v1/alerts?kind=conflicting_arguments", ACME)
        if code == 200 and any(a["key"] == key for a in alerts):
            break
        assert time.monotonic() < deadline, alerts
        time.sleep(0.5)


def test_no_answer_within_the_wait_is_202_and_the_effect_still_happens_once(
        gateway: str, sandbox: SandboxProc):
    key = new_key()
    code, answer = curl("POST", f"{gateway}/v1/intents", ACME, intent(key, wait=0))
    assert code == 202 and answer["answered"] is False
    assert answer["operation"] == {**answer["operation"], "found": False, "resolved": False}
    sandbox.wait_ledger(lambda ledger: any(e["idempotency_key"] == key
                                           for e in ledger["effects"]))
    assert len(sandbox.effects(key)) == 1


def test_a_tenant_can_neither_read_nor_write_another_tenants_keys(gateway: str,
                                                                  sandbox: SandboxProc):
    theirs = new_key("globex")
    code, _ = curl("POST", f"{gateway}/v1/intents", GLOBEX, intent(theirs))
    assert code == 200
    for method, path, body in (
            ("POST", "/v1/intents", intent(theirs)),
            ("GET", f"/v1/operations/{theirs}", None),
            ("GET", f"/v1/operations/{theirs}/timeline", None),
            ("POST", f"/v1/reconciliation/{theirs}",
             {"resolution": "failed", "attempt": 1, "operator": "mallory"})):
        code, answer = curl(method, f"{gateway}{path}", ACME, body)
        assert code == 403, (path, answer)
        assert "another tenant" in answer["detail"]
    code, queue = curl("GET", f"{gateway}/v1/reconciliation", ACME)
    assert code == 200 and all(op["key"].startswith("acme/") for op in queue)
    code, alerts = curl("GET", f"{gateway}/v1/alerts", ACME)
    assert code == 200 and all(a["key"].startswith("acme/") for a in alerts)
    assert len(sandbox.effects(theirs)) == 1  # only globex's own submit paid


def test_bad_requests_say_what_is_wrong(gateway: str):
    assert curl("GET", f"{gateway}/v1/operations/acme/refund/x")[0] == 401
    assert curl("GET", f"{gateway}/v1/operations/acme/refund/x", "wrong-key-0000000000")[0] \
        == 401
    code, answer = curl("POST", f"{gateway}/v1/intents", ACME,
                        {**intent(new_key()), "wait_seconds": 500})
    assert code == 422 and answer["detail"][0]["loc"][-1] == "wait_seconds"
    code, answer = curl("POST", f"{gateway}/v1/intents", ACME,
                        {**intent(new_key()), "action": "payout"})
    assert code == 400 and "action" in answer["detail"]
    code, answer = curl("GET", f"{gateway}/v1/operations/acme-only", ACME)
    assert code == 400 and "tenant/action/business-id" in answer["detail"]
    code, answer = curl("GET", f"{gateway}/v1/alerts?kind=nope", ACME)
    assert code == 400 and "nope" in answer["detail"]
    code, answer = curl("POST", f"{gateway}/v1/reconciliation/{new_key()}", ACME,
                        {"resolution": "failed", "attempt": 1, "operator": "ops"})
    assert code == 409 and "not waiting for an operator" in answer["detail"]
    code, answer = curl("GET", f"{gateway}/v1/operations/{new_key()}", ACME)
    assert code == 404


def test_the_openapi_schema_is_served(gateway: str):
    code, schema = curl("GET", f"{gateway}/openapi.json")
    assert code == 200
    assert {"/v1/intents", "/v1/operations/{key}", "/v1/operations/{key}/timeline",
            "/v1/alerts", "/v1/reconciliation", "/v1/reconciliation/{key}"} <= \
        set(schema["paths"])
    with pytest.raises(urllib.error.HTTPError):  # every /v1 route needs a key
        urllib.request.urlopen(f"{gateway}/v1/alerts", timeout=5)
