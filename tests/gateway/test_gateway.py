"""``ledger-stream api`` on the real broker, processor, HTTP connector and payments sandbox,
driven as a client in another language would: with curl, nothing but HTTP. Effects are
counted in the sandbox's own ledger. Tenants are isolated: a key of one tenant can neither
read nor write another tenant's operations."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from tests.gateway.support import ACME, GLOBEX, curl, intent, new_key

pytestmark = pytest.mark.timeout(180)

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
    code, rows = curl("GET", f"{gateway}/v1/timeline/{key}", ACME)
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
            ("GET", f"/v1/timeline/{theirs}", None),
            ("POST", f"/v1/reconciliation/{theirs}",
             {"resolution": "failed", "attempt": 1,
              "reason": "checked"})):
        code, answer = curl(method, f"{gateway}{path}", ACME, body)
        assert code == 403, (path, answer)
        assert "another tenant" in answer["detail"]
    code, queue = curl("GET", f"{gateway}/v1/reconciliation", ACME)
    assert code == 200 and all(op["key"].startswith("acme/") for op in queue)
    code, alerts = curl("GET", f"{gateway}/v1/alerts", ACME)
    assert code == 200 and all(a["key"].startswith("acme/") for a in alerts)
    assert len(sandbox.effects(theirs)) == 1  # only globex's own submit paid


def test_bad_requests_say_what_is_wrong_and_the_openapi_schema_is_served(bare_gateway: str):
    gateway = bare_gateway
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
                        {"resolution": "failed", "attempt": 1,
                         "reason": "checked the target"})
    assert code == 409 and "not waiting for an operator" in answer["detail"]
    code, answer = curl("GET", f"{gateway}/v1/operations/{new_key()}", ACME)
    assert code == 404

    code, schema = curl("GET", f"{gateway}/openapi.json")
    assert code == 200
    assert {"/v1/intents", "/v1/operations/{key}", "/v1/timeline/{key}",
            "/v1/alerts", "/v1/reconciliation", "/v1/reconciliation/{key}"} <= \
        set(schema["paths"])
    with pytest.raises(urllib.error.HTTPError):  # every /v1 route needs a key
        urllib.request.urlopen(f"{gateway}/v1/alerts", timeout=5)


def test_freezes_are_per_tenant_and_bad_ones_say_why(bare_gateway: str):
    gateway = bare_gateway
    # No processor here: the freeze is recorded, and the answer says it is not in force yet.
    code, frozen = curl("POST", f"{gateway}/v1/freezes?wait=0.5", ACME,
                        {"action": "refund", "reason": "INC-7"})
    assert code == 201, frozen
    assert (frozen["scope"], frozen["mode"], frozen["frozen"]) == ("acme/refund", "hold", True)
    assert (frozen["in_force"], frozen["not_applied"]) == (False, [0, 1, 2])
    code, listed = curl("GET", f"{gateway}/v1/freezes", ACME)
    assert code == 200 and [f["scope"] for f in listed] == ["acme/refund"]
    assert curl("GET", f"{gateway}/v1/freezes", GLOBEX) == (200, [])  # not globex's

    # globex's unfreeze of refund is its own scope: acme's freeze stays in force
    assert curl("DELETE", f"{gateway}/v1/freezes/refund?wait=0",
                GLOBEX)[0] == 200
    assert [f["scope"] for f in curl("GET", f"{gateway}/v1/freezes", ACME)[1]] == \
        ["acme/refund"]

    code, answer = curl("POST", f"{gateway}/v1/freezes", ACME,
                        {"action": "re/fund", "reason": "x"})
    assert code == 400 and "re/fund" in answer["detail"]
    code, answer = curl("POST", f"{gateway}/v1/freezes", ACME,
                        {"action": "refund"})
    assert code == 422 and answer["detail"][0]["loc"][-1] == "reason"
    assert curl("GET", f"{gateway}/v1/freezes")[0] == 401

    code, gone = curl("DELETE", f"{gateway}/v1/freezes/refund?wait=0", ACME,
                      headers={"Idempotency-Key": "unfreeze-inc-7"})
    assert code == 200 and gone["frozen"] is False
    assert gone["event_id"] == "gw:acme:unfreeze-inc-7"  # the tenant's own key space
    assert curl("GET", f"{gateway}/v1/freezes", ACME) == (200, [])

    # That unfreeze retried (its answer was lost) after a colleague froze again: a repeat,
    # which the processors ignore, and so does the list, which reads the log by their rule.
    assert curl("POST", f"{gateway}/v1/freezes?wait=0", ACME,
                {"action": "refund", "reason": "INC-8"})[0] == 201
    code, again = curl("DELETE", f"{gateway}/v1/freezes/refund?wait=0",
                       ACME, headers={"Idempotency-Key": "unfreeze-inc-7"})
    assert code == 200 and again["event_id"] == "gw:acme:unfreeze-inc-7"
    # Another tenant's request with the same key is its own command, not a repeat of acme's.
    code, theirs = curl("POST", f"{gateway}/v1/freezes?wait=0", GLOBEX,
                        {"action": "refund", "reason": "INC-1"},
                        headers={"Idempotency-Key": "unfreeze-inc-7"})
    assert code == 201 and theirs["event_id"] == "gw:globex:unfreeze-inc-7"
    code, listed = curl("GET", f"{gateway}/v1/freezes", ACME)
    assert code == 200 and [(f["scope"], f["reason"]) for f in listed] == \
        [("acme/refund", "INC-8")]
    code, answer = curl("DELETE", f"{gateway}/v1/freezes/refund?wait=0", ACME,
                        headers={"Idempotency-Key": "x" * 201})
    assert code == 422 and answer["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert curl("DELETE", f"{gateway}/v1/freezes/refund?wait=0", ACME)[0] \
        == 200
