"""The view answers only the gateway's tenant API keys, against the real broker: every read
route (enumerated from the server's own route table, so a new route is checked too)
refuses no key and an unknown key (401), refuses another tenant's key (403) without a byte
of the key's data, and answers its own tenant's key; the SDK sends its key and the
gateway's caller's; the process refuses to start without keys unless --no-auth, and then
only on loopback; /metrics answers this host only unless opened."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from pydantic import SecretStr

from ledger_lab.harness.view import ServedView
from ledger_stream import LedgerClient
from ledger_stream.cli.main import main as cli
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.gateway.auth import ApiKeys
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.sdk import ViewUnavailableError
from ledger_stream.sdk.view_client import ViewClient, forwarding
from ledger_stream.serde import AvroCodec
from ledger_stream.view.server import DECISIONS, ROUTES, make_server, serve_in_thread
from tests import factories
from tests.addresses import outward_address

pytestmark = pytest.mark.timeout(120)

ACME, GLOBEX = "acme-view-key-0123456789", "globex-view-key-0123456789"
KEYS = f"acme={ACME},globex={GLOBEX}"


class Seeded:
    def __init__(self, settings: Settings) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.key = f"acme/refund/inv-{suffix}"
        self.secret = f"EXT-{suffix}"  # in acme's records only: must never reach globex
        self.receipt = ev.Receipt(
            receipt_id=uuid.uuid4().hex, key=self.key, intent_event_id="i1",
            status=ev.ReceiptStatus.SUCCEEDED, reason=ev.Reason.NONE, args_hash="h",
            attempts=1, at_ms=1, key_status=ev.ReceiptStatus.SUCCEEDED,
            external_id=self.secret)
        decision = factories.resolution(ev.Resolution.APPLIED, key=self.key,
                                        external_id=self.secret)
        self.decision_id = decision.event_id
        producer = EventProducer(settings, settings.kafka_bootstrap, AvroCodec())
        producer.send("receipts", self.receipt)
        producer.send("attempts", decision)
        producer.flush()


@pytest.fixture
def seeded(ledger_topics: Settings) -> Seeded:
    return Seeded(ledger_topics)


@pytest.fixture
def view(ledger_topics: Settings, tmp_path: Path, seeded: Seeded) -> Iterator[ServedView]:
    served = ServedView(ledger_topics, tmp_path / "view", keys=ApiKeys.parse(KEYS))
    yield served
    served.close()


def get(url: str, key: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"}
                                     if key else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def path_of(prefix: str, seeded: Seeded) -> str:
    if prefix == DECISIONS:
        return f"{prefix}{quote(seeded.decision_id, safe='')}?tenant=acme&wait_ms=10000"
    return f"{prefix}{quote(seeded.key, safe='')}?wait_ms=10000"


def test_every_read_route_answers_only_its_tenants_key(view: ServedView,
                                                       seeded: Seeded) -> None:
    private = [r for r in ROUTES if not r.public]
    assert len(private) >= 4  # operations, timeline, evidence, decisions
    for route in private:
        url = view.url + path_of(route.path, seeded)
        for key in (None, "not-a-known-key-at-all"):
            status, body = get(url, key)
            assert status == 401, (route, key, status, body)
            assert seeded.secret not in body
        status, body = get(url, GLOBEX)
        assert status == 403, (route, status, body)
        assert seeded.secret not in body and seeded.receipt.receipt_id not in body
        status, body = get(url, ACME)
        assert status == 200, (route, status, body)
        assert seeded.secret in body, (route, body)  # the refusals above hid real data


def test_a_decision_is_looked_up_in_the_keys_tenant_only(view: ServedView,
                                                         seeded: Seeded) -> None:
    url = f"{view.url}{DECISIONS}{quote(seeded.decision_id, safe='')}?wait_ms=10000"
    status, body = get(url, GLOBEX)  # no tenant named: the key's own, where it is not
    assert status == 200 and json.loads(body)["decision"] is None
    status, body = get(url, ACME)
    assert status == 200 and json.loads(body)["decision"]["external_id"] == seeded.secret


def test_public_routes_hold_no_tenant_data(view: ServedView, seeded: Seeded) -> None:
    for route in (r for r in ROUTES if r.public):
        status, body = get(view.url + route.path)
        assert status == 200, (route, body)
        assert seeded.key not in body and seeded.secret not in body


def test_the_sdk_sends_its_key_and_the_gateway_its_callers(
        ledger_topics: Settings, view: ServedView, seeded: Seeded) -> None:
    settings = ledger_topics.model_copy(update={"view_url": view.url})
    with LedgerClient(settings.model_copy(update={"view_key": None})) as anonymous, \
            pytest.raises(ViewUnavailableError, match="LEDGER_VIEW_KEY"):
        anonymous.status(seeded.key, wait=10)
    with LedgerClient(settings.model_copy(update={"view_key": SecretStr(ACME)})) as acme:
        receipt = acme.status(seeded.key, wait=10)
    assert receipt is not None and receipt.external_id == seeded.secret
    client = ViewClient(view.url, key=ACME)
    with forwarding(GLOBEX), pytest.raises(ViewUnavailableError, match="403"):
        client.history(seeded.key, "timeline", 10)  # the caller's key, not the client's



@pytest.mark.parametrize("opened", [False, True])
def test_metrics_answer_this_host_only_unless_opened(view: ServedView, opened: bool) -> None:
    server = make_server(view.view, AvroCodec(), "0.0.0.0", 0, None,
                         keys=ApiKeys.parse(KEYS), metrics_open=opened)
    serve_in_thread(server)
    try:
        port = server.server_port
        status, body = get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and "ledger_view_request_seconds" in body
        status, body = get(f"http://{outward_address()}:{port}/metrics")
        assert status == (200 if opened else 403), body
    finally:
        server.shutdown()
        server.server_close()


def test_the_view_refuses_to_start_without_keys(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LEDGER_API_KEYS", "LEDGER_API_KEYS_FILE", "LEDGER_DEV_MODE"):
        monkeypatch.delenv(name, raising=False)
    assert cli(["view", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "answers only API keys" in capsys.readouterr().err
    assert cli(["view", "--no-auth", "--host", "0.0.0.0", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "listens only on a loopback address" in capsys.readouterr().err


def test_a_view_without_keys_answers_only_requests_for_this_host(view: ServedView,
                                                                 seeded: Seeded) -> None:
    """Without keys (--no-auth) the view trusts that only this host reaches it. A web page
    in a browser on this host reaches it too once its own name resolves to 127.0.0.1 (DNS
    rebinding), and then sends its own name as Host: refused, on every private route."""
    server = make_server(view.view, AvroCodec(), "127.0.0.1", 0, view.timeline, keys=None)
    serve_in_thread(server)
    try:
        port = server.server_port
        for route in (r for r in ROUTES if not r.public):
            url = f"http://127.0.0.1:{port}{path_of(route.path, seeded)}"
            for host in (f"attacker.example:{port}", "attacker.example", "127.0.0.1.nip.io"):
                request = urllib.request.Request(url, headers={"Host": host})
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        status, body = response.status, response.read().decode()
                except urllib.error.HTTPError as err:
                    status, body = err.code, err.read().decode()
                assert status == 403 and seeded.secret not in body, (route, host, body)
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
                request = urllib.request.Request(url, headers={"Host": host})
                with urllib.request.urlopen(request, timeout=30) as response:
                    assert response.status == 200, (route, host)
    finally:
        server.shutdown()
        server.server_close()
