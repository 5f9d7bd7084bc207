"""Every read route of the gateway, enumerated from the app itself (a new GET route is
checked without touching this file), against the gateway process on the real broker: no key
and an unknown key are refused (401), another tenant's key is refused (403) or answered with
its own tenant's data only, never a byte of the key's; the key's own tenant reads it. Also
the gateway's ``/metrics``: this host only unless opened, serving the ledger's metrics."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from ledger_lab.harness.view import ServedView
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.gateway import ApiKeys, build_app
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.sdk.client import AsyncLedgerClient
from ledger_stream.serde import AvroCodec
from tests.addresses import outward_address
from tests.gateway.support import ACME, GLOBEX, curl, serve_gateway

pytestmark = pytest.mark.timeout(180)

# Routes that answer without a key: none holds a tenant's data.
PUBLIC = {"/healthz", "/metrics", "/console", "/openapi.json", "/docs", "/docs/oauth2-redirect",
          "/redoc"}


def read_routes(settings: Settings) -> list[str]:
    """The path template of every GET route of the gateway's app."""
    client = AsyncLedgerClient(settings)
    try:
        app = build_app(client, ApiKeys.parse(f"acme={ACME}"))
    finally:
        client.client.close()
    paths = [r.path for r in app.routes if "GET" in getattr(r, "methods", ())]
    assert any(isinstance(r, APIRoute) for r in app.routes)
    return paths


class Seeded:
    """acme's records in every read list and key route; the secret marks acme's data."""

    def __init__(self, settings: Settings, gateway: str) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.key = f"acme/refund/inv-{suffix}"
        self.secret = f"EXT{suffix}"
        receipt = ev.Receipt(
            receipt_id=uuid.uuid4().hex, key=self.key, intent_event_id="i1",
            status=ev.ReceiptStatus.NEEDS_RECONCILIATION, reason=ev.Reason.NONE,
            args_hash="h", attempts=1, at_ms=1,
            key_status=ev.ReceiptStatus.NEEDS_RECONCILIATION, external_id=self.secret,
            detail=f"waiting {self.secret}")
        alert = ev.Alert(alert_id=uuid.uuid4().hex, key=self.key,
                         kind=ev.AlertKind.DUPLICATE_EFFECT, source_event_id="s",
                         detail=f"seen {self.secret}", at_ms=1)
        producer = EventProducer(settings, settings.kafka_bootstrap, AvroCodec())
        producer.send("receipts", receipt)
        producer.send("alerts", alert)
        producer.flush()
        code, body = curl("POST", f"{gateway}/v1/freezes?wait=0", ACME, {
            "action": "refund", "reason": f"incident {self.secret}"})
        assert code == 201, body


@pytest.fixture
def seeded_gateway(ledger_topics: Settings, tmp_path: Path) -> Iterator[tuple[str, Seeded]]:
    for url in serve_gateway(ledger_topics, tmp_path):
        yield url, Seeded(ledger_topics, url)


def test_every_read_route_answers_only_its_tenants_key(
        ledger_topics: Settings, seeded_gateway: tuple[str, Seeded]) -> None:
    gateway, seeded = seeded_gateway
    private = [p for p in read_routes(ledger_topics) if p not in PUBLIC]
    assert {"/v1/operations/{key:path}", "/v1/timeline/{key:path}", "/v1/evidence/{key:path}",
            "/v1/alerts", "/v1/reconciliation", "/v1/freezes"} <= set(private)
    for template in private:
        assert set(re.findall(r"{(\w+)", template)) <= {"key"}, template  # fill it below
        url = gateway + re.sub(r"{key(:path)?}", seeded.key, template)
        for key in (None, "not-a-known-key-at-all"):
            code, body = curl("GET", url, key)
            assert code == 401, (template, key, code, body)
            assert seeded.secret not in str(body)
        if template == "/v1/whoami":  # names the key's own holder; reads no ledger data
            continue
        code, body = curl("GET", url, GLOBEX)
        assert code in (403, 404) if "{key" in template else code == 200, (template, code)
        assert seeded.secret not in str(body), (template, body)
        code, body = curl("GET", url, ACME)
        assert code == 200, (template, code, body)
        assert seeded.secret in str(body), (template, body)  # the refusals hid real data


def test_public_routes_hold_no_tenant_data(
        ledger_topics: Settings, seeded_gateway: tuple[str, Seeded]) -> None:
    gateway, seeded = seeded_gateway
    for path in PUBLIC & set(read_routes(ledger_topics)):
        out = _raw(f"{gateway}{path}")
        assert seeded.key not in out and seeded.secret not in out, path


def test_evidence_is_the_keys_redacted_document(
        seeded_gateway: tuple[str, Seeded]) -> None:
    gateway, seeded = seeded_gateway
    code, body = curl("GET", f"{gateway}/v1/evidence/{seeded.key}", ACME)
    assert code == 200 and body["key"] == seeded.key
    code, body = curl("GET", f"{gateway}/v1/evidence/acme/refund/never-seen", ACME)
    assert code == 404


def _raw(url: str, headers: dict[str, str] | None = None) -> str:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                    timeout=30) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as err:
        return f"{err.code} {err.read().decode()}"



@pytest.mark.parametrize("opened", [False, True])
def test_gateway_metrics_answer_this_host_unless_opened(
        ledger_topics: Settings, tmp_path: Path, opened: bool) -> None:
    outward = outward_address()
    extra = ["--host", "0.0.0.0", *(["--metrics-host", "0.0.0.0"] if opened else [])]
    for gateway in serve_gateway(ledger_topics, tmp_path, *extra):
        assert curl("GET", f"{gateway}/v1/alerts")[0] == 401
        local = _raw(f"{gateway}/metrics")
        assert 'ledger_gateway_requests_total{route="/v1/alerts",status="401"} 1.0' in local
        far = _raw(gateway.replace("127.0.0.1", outward) + "/metrics")
        assert far.startswith("403 ") != opened, far


def test_gateway_metrics_trust_no_forwarded_address(ledger_topics: Settings,
                                                   tmp_path: Path) -> None:
    """Behind a proxy uvicorn takes the client's address from X-Forwarded-For (whose first
    entry the client writes, with FORWARDED_ALLOW_IPS=*): a forwarded request is not this
    host's, whatever address it names."""
    outward = outward_address()
    for gateway in serve_gateway(ledger_topics, tmp_path, "--host", "0.0.0.0",
                                 env={"FORWARDED_ALLOW_IPS": "*"}):
        assert "ledger_gateway_requests_total" in _raw(f"{gateway}/metrics")
        spoofed = {"X-Forwarded-For": "127.0.0.1"}
        far = _raw(gateway.replace("127.0.0.1", outward) + "/metrics", spoofed)
        assert far.startswith("403 "), far
        proxied = _raw(f"{gateway}/metrics", {"X-Forwarded-For": "127.0.0.1, 203.0.113.9"})
        assert proxied.startswith("403 "), proxied


def test_the_gateway_reads_a_keyed_view_with_its_callers_key(ledger_topics: Settings,
                                                             tmp_path: Path) -> None:
    """The view checks the tenant again: the gateway sends it the caller's key, never one
    of its own, so a key the view does not know reads nothing through the gateway."""
    view = ServedView(ledger_topics, tmp_path / "view",
                      keys=ApiKeys.parse(f"acme={ACME},globex={GLOBEX}"))
    try:
        for gateway in serve_gateway(ledger_topics, tmp_path,
                                     env={"LEDGER_VIEW_URL": view.url}):
            seeded = Seeded(ledger_topics, gateway)
            for route in ("operations", "timeline", "evidence"):
                code, body = curl("GET", f"{gateway}/v1/{route}/{seeded.key}", ACME)
                assert code == 200 and seeded.secret in str(body), (route, code, body)
    finally:
        view.close()
