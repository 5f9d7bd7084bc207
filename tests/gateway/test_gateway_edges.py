"""Requests at the edges of what the gateway accepts, against the real app with a real
AsyncLedgerClient whose bootstrap is unreachable (librdkafka's own checks still run) and a
receipts subscription without a consumer. No broker. Each case was found by a hostile review
on 2026-12-05 and answered 500 (or a misleading 400) before: every one is now a 4xx saying
what is wrong, or 503 for what a retry may cure, and no 422 echoes the request's values."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.config import Settings
from ledger_stream.gateway import ApiKeys, build_app
from ledger_stream.sdk.client import AsyncLedgerClient
from ledger_stream.serde import make_codec
from tests.gateway.support import RegisteringHub

pytestmark = pytest.mark.timeout(60)
ACME = "acme-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {ACME}"}


@pytest.fixture
def gateway() -> Any:
    def make(registry: str | None = None, view_url: str | None = None) -> TestClient:
        settings = Settings(view_url=view_url) if view_url else Settings()
        client = AsyncLedgerClient(settings, bootstrap="127.0.0.1:1",
                                   codec=make_codec(registry))
        client.client._hub = RegisteringHub()
        return TestClient(build_app(client, ApiKeys([("acme", ACME)], operators={ACME: "ops"})),
                          raise_server_exceptions=False)

    return make


def body(key: str = "acme/refund/inv-1", **over: Any) -> dict[str, Any]:
    return {"key": key, "action": "refund", "target": "payments",
            "args": {"amount": 4200, "currency": "EUR"},
            "workflow": {"graph": "g", "version": "1"}, "wait_seconds": 0, **over}


def post_raw(tc: TestClient, raw: bytes) -> Any:
    return tc.post("/v1/intents", content=raw,
                   headers={**AUTH, "Content-Type": "application/json"})


def test_an_intent_larger_than_kafka_accepts_is_a_400_naming_it(gateway) -> None:
    r = gateway().post("/v1/intents", json=body(args={"memo": "x" * 1_100_000}),
                       headers=AUTH)
    assert r.status_code == 400 and "larger than Kafka accepts" in r.json()["detail"]


def test_the_largest_args_the_ledger_takes_fit_the_body_bound_ascii_escaped(gateway) -> None:
    # 800,000 bytes of args in the row (under ROW_TEXTS_MAX), 2.4 MB as json.dumps sends
    # them by default (every emoji \ud83d\ude00): the gateway reads them.
    raw = json.dumps(body(args={"note": "\U0001F600" * 200_000}, wait_seconds=1)).encode()
    assert len(raw) > 2_400_000 and raw.isascii()
    r = post_raw(gateway(), raw)
    assert r.status_code != 413, r.text[:300]


def test_a_key_that_is_not_valid_unicode_is_a_400(gateway) -> None:
    raw = json.dumps(body()).replace("inv-1", "inv-\\ud800").encode()  # a lone surrogate
    r = post_raw(gateway(), raw)
    assert r.status_code == 400 and "not valid Unicode" in r.json()["detail"]


def test_a_schema_registry_outage_is_a_503_not_a_bad_intent(gateway, caplog) -> None:
    r = gateway(registry="http://127.0.0.1:1").post("/v1/intents", json=body(),
                                                       headers=AUTH)
    assert r.status_code == 503
    # Where the registry is, and what failed, is the operator's: logged, never answered.
    assert r.json() == {"detail": "the schema registry cannot be reached"}
    assert any("127.0.0.1:1" in getattr(record, "fields", {}).get("error", "")
               for record in caplog.records)


def test_a_kafka_outage_is_a_503_that_names_no_address(gateway, caplog) -> None:
    r = gateway().post("/v1/intents", json=body(wait_seconds=1), headers=AUTH)
    assert r.status_code == 503
    assert r.json() == {"detail": "the ledger cannot be reached"}  # not the bootstrap
    assert any("127.0.0.1:1" in getattr(record, "fields", {}).get("error", "")
               for record in caplog.records)


def _view_outage(tc: TestClient, view: str, route: str, caplog: Any) -> None:
    r = tc.get(f"/v1/{route}/acme/refund/inv-1", headers=AUTH)
    assert r.status_code == 503
    assert r.json() == {"detail": "the view cannot be reached"}  # not the view's address
    assert any(view in getattr(record, "fields", {}).get("error", "")
               for record in caplog.records)


@pytest.mark.parametrize("route", ["timeline", "evidence"])
def test_a_view_outage_is_a_503_that_names_no_address(gateway, caplog, route: str) -> None:
    (port,) = pick_free_ports(1)  # nothing listens there
    view = f"127.0.0.1:{port}"
    _view_outage(gateway(view_url=f"http://{view}"), view, route, caplog)


def test_a_view_outage_reading_a_status_names_no_address(ledger_topics: Settings,
                                                         caplog) -> None:
    # A key's status asks Kafka for the partition's end before it asks the view: a broker.
    (port,) = pick_free_ports(1)
    view = f"127.0.0.1:{port}"
    client = AsyncLedgerClient(ledger_topics.model_copy(update={"view_url": f"http://{view}"}),
                               codec=make_codec(None))
    client.client._hub = RegisteringHub()
    tc = TestClient(build_app(client, ApiKeys([("acme", ACME)])), raise_server_exceptions=False)
    _view_outage(tc, view, "operations", caplog)


@pytest.mark.parametrize("field,raw", [
    ("target", '"target": "pay\\ud800"'),
    ("args", '"args": {"amount": 4200, "\\udc00": "EUR"}'),
    ("payload", '"payload": {"text": ["\\ud800"]}'),
    ("policy_revision", '"policy_revision": "\\ud800"'),
    ("approval", '"approval": {"approval_id": "\\ud800", "payload_hash": "x", '
                 '"policy_revision": "", "expires_at_ms": 1, "signature": "zz"}'),
])
def test_text_utf8_cannot_carry_is_a_400_naming_its_field(gateway, field: str,
                                                          raw: str) -> None:
    """A lone surrogate (JSON's \\ud800) has no UTF-8 bytes: the 400 names the field, and
    never echoes its value."""
    fields = {k: v for k, v in body().items() if k != field}
    r = post_raw(gateway(), (json.dumps(fields)[:-1] + ", " + raw + "}").encode())
    assert r.status_code == 400, r.text
    assert r.json()["detail"] == (f"the intent's {field} is not valid UTF-8 text (it holds a "
                                  "lone surrogate)")


def test_a_422_names_the_field_and_never_echoes_its_value(gateway) -> None:
    r = gateway().post("/v1/intents", json=body(args=["card 4111111111111111"]),
                       headers=AUTH)
    assert r.status_code == 422
    assert "4111111111111111" not in r.text
    assert r.json()["detail"][0]["loc"] == ["body", "args"]


@pytest.mark.parametrize("raw", [
    json.dumps(body()).replace('"wait_seconds": 0', '"wait_seconds": NaN'),
    json.dumps(body()).replace('"wait_seconds": 0', '"wait_seconds": 0, "extra": Infinity'),
])
def test_nan_or_infinity_in_a_body_is_a_422_not_a_500(gateway, raw: str) -> None:
    assert post_raw(gateway(), raw.encode()).status_code == 422


def test_reason_texts_are_bounded(gateway) -> None:
    tc = gateway()
    r = tc.post("/v1/reconciliation/acme/refund/inv-1", headers=AUTH, json={
        "resolution": "applied", "attempt": 1, "external_id": "x", "reason": "r" * 501})
    assert r.status_code == 422  # not a Kafka "message too large" reported as 503
    r = tc.post("/v1/reconciliation/acme/refund/inv-1", headers=AUTH, json={
        "resolution": "applied", "attempt": 1, "external_id": "x" * 2_000_000, "reason": "r"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "external_id"]
    assert len(r.text) < 300  # one problem, the value not echoed
    r = tc.post("/v1/approvals", headers=AUTH, json={
        "key": "acme/payout/" + "p" * 2_000_000, "args_hash": "ab" * 32})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "key"]


def test_a_request_naming_its_own_operator_is_refused(gateway) -> None:
    # The operator is the API key's holder: a body or query naming another is refused
    # (never silently ignored, so a script that thinks it names the operator learns why).
    tc = gateway()
    r = tc.post("/v1/reconciliation/acme/refund/inv-1", headers=AUTH, json={
        "resolution": "failed", "attempt": 1, "operator": "mallory", "reason": "r"})
    assert r.status_code == 422 and "holder of the API key" in r.text
    r = tc.post("/v1/freezes", headers=AUTH, json={"action": "refund", "reason": "r",
                                                   "operator": "mallory"})
    assert r.status_code == 422 and "holder of the API key" in r.text
    r = tc.delete("/v1/freezes/refund?operator=mallory", headers=AUTH)
    assert r.status_code == 400 and "holder of the API key" in r.text
    # Every operator route, query or body, "operator" or "by" (a query naming one on a
    # decision or a freeze was silently ignored).
    for query in ("operator=mallory", "by=mallory"):
        for method, path, sent in (
                ("POST", "/v1/reconciliation/acme/refund/inv-1", {
                    "resolution": "failed", "attempt": 1, "reason": "r"}),
                ("POST", "/v1/freezes", {"action": "refund", "reason": "r"}),
                ("DELETE", "/v1/freezes/refund", None),
                ("POST", "/v1/approvals", {"key": "acme/refund/inv-1",
                                           "args_hash": "ab" * 32})):
            r = tc.request(method, f"{path}?wait=0&{query}", headers=AUTH, json=sent)
            assert r.status_code == 400 and "holder of the API key" in r.text, (path, query)
    r = tc.post("/v1/freezes", headers=AUTH, json={"action": "refund", "reason": "r",
                                                   "by": "mallory"})
    assert r.status_code == 422 and "holder of the API key" in r.text


AGENT_KEY = "acme-agent-key-0123456789"
UNNAMED_KEY = "acme-unnamed-key-0123456789"


def test_an_agents_key_submits_but_never_reaches_the_operator_routes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by a hostile review (2026-12-05): every key could decide its tenant's unknown
    # outcomes; an agent deciding "not applied" has the effect sent again.
    from ledger_stream.gateway import app as app_module

    reached: list[str] = []

    def refuse(what: str) -> Any:
        def stub(*args: Any, **kwargs: Any) -> Any:
            reached.append(what)
            raise app_module.containment.ContainmentRefused(f"stub: {what} reached")
        return stub

    monkeypatch.setattr(app_module.containment, "send", refuse("containment"))
    monkeypatch.setattr(app_module, "record_decision", refuse("decision"))
    client = AsyncLedgerClient(Settings(), bootstrap="127.0.0.1:1")
    client.client._hub = RegisteringHub()
    # A key that names no holder (TENANT=KEY) is an agent's too: no operator to audit.
    keys = ApiKeys.parse(f"acme:operator:ops={ACME}\nacme:agent={AGENT_KEY}\n"
                         f"acme={UNNAMED_KEY}")
    assert keys.unnamed == ("--keys item 3",)
    tc = TestClient(build_app(client, keys), raise_server_exceptions=False)
    decision = {"resolution": "not_applied", "attempt": 1, "reason": "r"}
    freeze = {"action": "refund", "reason": "r"}
    for key in (AGENT_KEY, UNNAMED_KEY):
        agent = {"Authorization": f"Bearer {key}"}
        assert tc.post("/v1/reconciliation/acme/refund/inv-1", json=decision,
                       headers=agent).status_code == 403
        assert tc.post("/v1/freezes", json=freeze, headers=agent).status_code == 403
        assert tc.delete("/v1/freezes/refund", headers=agent).status_code == 403
    assert reached == []
    # The same routes with an operator's key get past authorization...
    assert tc.delete("/v1/freezes/refund", headers=AUTH).status_code == 400
    assert reached == ["containment"]
    # ...and the agent's key still submits (here: refused by Kafka's own size check).
    r = tc.post("/v1/intents", json=body(args={"memo": "x" * 1_100_000}), headers=agent)
    assert r.status_code == 400


def test_a_freeze_recorded_whose_application_cannot_be_read_is_not_a_failure(
        gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    # The command committed; only the processors' progress could not be read. A 503 here
    # would have a client without a key send a new command (an unfreeze lifting a freeze
    # made in between): it is answered as recorded, in force unknown.
    from ledger_stream.domain import events as ev
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.operate import containment

    sent: list[str] = []

    def send(*_: Any, **kw: Any) -> tuple[ev.Containment, dict[int, int]]:
        sent.append(kw["event_id"])
        return ev.Containment(kw["event_id"], 0, kw["action"], kw["tenant"], kw["frozen"],
                              kw["mode"], kw["reason"], kw["actor"].who, 7), {0: 4, 1: 9}

    def not_applied(*_: Any) -> list[int]:
        raise KafkaSetupError("the group coordinator did not answer")

    monkeypatch.setattr(containment, "send", send)
    monkeypatch.setattr(containment, "not_applied", not_applied)
    r = gateway().post("/v1/freezes", headers={**AUTH, "Idempotency-Key": "inc-7"},
                       json={"action": "refund", "reason": "INC-7"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert (body["in_force"], body["not_applied"], body["event_id"], body["operator"]) == (
        None, [0, 1], "gw:acme:inc-7", "ops")
    assert sent == ["gw:acme:inc-7"]


def test_a_command_whose_audit_record_was_not_written_is_a_503(
        gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    # The command was not sent (operate/audit.py): a retry may succeed, so 503, and a
    # freeze's answer names the Idempotency-Key to retry it with.
    from ledger_stream.gateway import app as app_module
    from ledger_stream.operate import AuditNotWritten

    def unaudited(*_: Any, **__: Any) -> Any:
        raise AuditNotWritten("the audit record of this freeze could not be written")

    monkeypatch.setattr(app_module.containment, "send", unaudited)
    monkeypatch.setattr(app_module, "record_decision", unaudited)
    tc = gateway()
    r = tc.post("/v1/freezes", headers={**AUTH, "Idempotency-Key": "inc-9"},
                json={"action": "refund", "reason": "INC-9"})
    assert r.status_code == 503 and r.headers["Idempotency-Key"] == "inc-9"
    assert "could not be written" in r.json()["detail"]
    r = tc.post("/v1/reconciliation/acme/refund/inv-1", headers=AUTH,
                json={"resolution": "failed", "attempt": 1, "reason": "r"})
    assert r.status_code == 503 and "could not be written" in r.json()["detail"]
