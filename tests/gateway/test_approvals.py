"""The gateway's approval routes: only an operator's key of the key's own tenant gets an
approval signed (an agent's key 403, another tenant's 403, no signing key 503); and end to
end on the real stack, in headless Chromium: the console lists an intent rejected for a
missing approval, its Approve form signs one, and the intent with that approval is paid
once. Screenshots as in test_console.py (LEDGER_SCREENSHOTS)."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import expect

from ledger_lab.harness.approvers import (
    TEST_APPROVER,
    seeded_approver,
    trusted,
    write_signing_key,
)
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import approval_problem
from ledger_stream.gateway import ApiKeys, build_app
from ledger_stream.gateway import approvals as approvals_module
from ledger_stream.kafka.receipts import key_records
from ledger_stream.operate.approvals import approval_json, approve
from ledger_stream.operate.audit import Actor
from ledger_stream.sdk.client import AsyncLedgerClient
from ledger_stream.serde import AvroCodec
from tests.console_browser import CHROMIUM, console_page, shot
from tests.factories import intent as make_intent
from tests.gateway.support import ACME, GLOBEX, curl, serve_gateway

pytestmark = pytest.mark.timeout(180)

AGENT_KEY = "acme-agent-key-0123456789"
HASH = "ab" * 32


class Audited:
    """The audit writes a test's gateway made: (who, key, approval id)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def append_call(self, settings: Settings, bootstrap: str, codec: object, actor: Actor,
                    key: str, approval_id: str, detail: str = "") -> None:
        self.calls.append((actor.who, key, approval_id))


AUDITED = Audited()


@pytest.fixture
def app_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    settings = Settings(approval_signing_key=write_signing_key(TEST_APPROVER, tmp_path))
    client = AsyncLedgerClient(settings, bootstrap="127.0.0.1:1")  # never reached
    # The audit write, behind its function (on a real broker: the console test below).
    monkeypatch.setattr(approvals_module, "record_approval", AUDITED.append_call)
    AUDITED.calls.clear()
    keys = ApiKeys.parse(f"acme:operator:ops-ann={ACME}\nglobex:operator:ops-eve={GLOBEX}\n"
                         f"acme:agent={AGENT_KEY}")
    yield TestClient(build_app(client, keys), raise_server_exceptions=False)
    client.client.close()


def _approve(tc: TestClient, api_key: str, key: str = "acme/payout/p-1", **body: object):
    return tc.post("/v1/approvals", headers={"Authorization": f"Bearer {api_key}"},
                   json={"key": key, "args_hash": HASH, **body})


def test_an_operator_key_gets_an_approval_the_ledger_accepts(app_client: TestClient):
    r = _approve(app_client, ACME, expires_in_s=60)
    assert r.status_code == 201, r.text
    approval = ev.Approval(**r.json())
    assert approval.key_id == TEST_APPROVER.key_id
    assert AUDITED.calls == [("ops-ann", "acme/payout/p-1", approval.approval_id)]
    subject = dataclasses.replace(make_intent(key="acme/payout/p-1", approval=approval),
                                  args_hash=HASH)
    assert approval_problem(subject, trusted(TEST_APPROVER), True,
                            approval.expires_at_ms - 1) is None


def test_an_agents_key_and_another_tenants_key_are_refused(app_client: TestClient):
    r = _approve(app_client, AGENT_KEY)
    assert r.status_code == 403 and "not an operator's" in r.json()["detail"]
    r = _approve(app_client, GLOBEX)
    assert r.status_code == 403 and "another tenant" in r.json()["detail"]
    assert _approve(app_client, "no-such-key-0123456789").status_code == 401
    assert _approve(app_client, ACME, args_hash="0" * 10).status_code == 422
    assert _approve(app_client, ACME, expires_in_s=0).status_code == 422
    # The signed text is one field a line: a line break would make it ambiguous.
    r = _approve(app_client, ACME, policy_revision="r1\nx")
    assert r.status_code == 400 and "line break" in r.json()["detail"]
    assert _approve(app_client, ACME, key="acme/payout/p-1\nx").status_code == 400
    assert _approve(app_client, ACME, key="acmex/payout/p-1").status_code == 403


def test_an_approval_whose_audit_record_was_not_written_is_not_handed_out(
        app_client: TestClient, monkeypatch: pytest.MonkeyPatch):
    from ledger_stream.operate.audit import AuditNotWritten

    def unaudited(*_: object, **__: object) -> None:
        raise AuditNotWritten("the audit record of this approval could not be written")

    monkeypatch.setattr(approvals_module, "record_approval", unaudited)
    r = _approve(app_client, ACME)
    assert r.status_code == 503 and "could not be written" in r.json()["detail"]
    assert "signature" not in r.text


def test_without_a_signing_key_the_gateway_approves_nothing():
    client = AsyncLedgerClient(Settings(approval_signing_key=None), bootstrap="127.0.0.1:1")
    try:
        tc = TestClient(build_app(client, ApiKeys.parse(f"acme:operator:ops-ann={ACME}")),
                        raise_server_exceptions=False)
        r = _approve(tc, ACME)
        assert r.status_code == 503 and "LEDGER_APPROVAL_SIGNING_KEY" in r.json()["detail"]
    finally:
        client.client.close()


def test_the_console_approves_a_pending_intent_once(ledger_topics: Settings, tmp_path: Path,
                                                    sandbox: SandboxProc):
    assert CHROMIUM, "Debian's chromium is needed (.ci/run installs it)"
    folder = Path(os.environ.get("LEDGER_SCREENSHOTS") or tmp_path)
    stack = Stack(ledger_topics, tmp_path,
                  processor_env={"LEDGER_APPROVAL_REQUIRED_ACTIONS": '["payout"]'})
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url, "--deduplicates")
    signing = write_signing_key(TEST_APPROVER, tmp_path)
    served = serve_gateway(ledger_topics, tmp_path,
                           env={"LEDGER_APPROVAL_SIGNING_KEY": str(signing)})
    gateway = next(served)
    try:
        key = f"acme/payout/{uuid.uuid4().hex[:8]}"
        body = {"key": key, "action": "payout", "target": "payments",
                "args": {"amount": 700, "currency": "EUR"},
                "workflow": {"graph": "billing-bot", "version": "3.1"}, "wait_seconds": 30}
        code, answer = curl("POST", f"{gateway}/v1/intents", ACME, body)
        assert code == 200 and answer["operation"]["reason"] == "approval", answer
        code, pending = curl("GET", f"{gateway}/v1/approvals", GLOBEX)
        assert (code, pending) == (200, [])  # another tenant sees none of it
        # An intent rejected for a forged approval waits for nothing: it is not listed.
        forged_key = f"acme/payout/{uuid.uuid4().hex[:8]}"
        stranger = seeded_approver("ops-x", "a key no processor trusts")
        forged = approval_json(approve(stranger, forged_key, make_intent(
            key=forged_key, args={"amount": 700, "currency": "EUR"}).args_hash))
        code, answer = curl("POST", f"{gateway}/v1/intents", ACME,
                            {**body, "key": forged_key, "approval": forged})
        assert code == 200 and answer["operation"]["reason"] == "approval", answer
        code, pending = curl("GET", f"{gateway}/v1/approvals", ACME)
        assert code == 200 and [p["key"] for p in pending] == [key], pending
        with console_page(gateway, ACME) as page:
            row = page.locator("#approvals tbody tr").filter(has_text=key)
            expect(row).to_contain_text("payout", timeout=20_000)
            shot(page, folder, "approvals-pending")
            row.locator("select").select_option("3600")
            row.locator("button").click()
            expect(page.locator("#approval-status")).to_contain_text(
                f"approved {key}", timeout=20_000)
            approval = json.loads(page.locator("#approval-result").text_content() or "")
            shot(page, folder, "approvals-approved")
        assert approval["key_id"] == TEST_APPROVER.key_id
        code, answer = curl("POST", f"{gateway}/v1/intents", ACME, {**body,
                                                                    "approval": approval})
        assert code == 200 and answer["operation"]["reason"] != "approval", answer
        stack.await_key(key, {ev.ReceiptStatus.SUCCEEDED})
        assert len(sandbox.effects(key)) == 1
        assert curl("GET", f"{gateway}/v1/approvals", ACME) == (200, [])
        (audited,) = [AvroCodec().decode(r.value, (ev.AuditRecord,)) for r in key_records(
            stack.bootstrap, ledger_topics.topic("audit"), key)]
        assert (audited.who, audited.role, audited.action, audited.command_id) == (
            "ops-ann", "operator", ev.AuditAction.APPROVAL, approval["approval_id"])
    finally:
        next(served, None)
        stack.close()
