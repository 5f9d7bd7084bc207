"""The gateway's OpenAPI document says what it does. For every route of the app's own route
table: it is in the document (or is one of the pages that serve the docs and the console),
in one of the route groups ``ledger-stream api --help`` names, with the security it needs;
each status the document lists is produced below against the real gateway (a real broker
and processor; for the 503s a Kafka that cannot be reached, and topics without the audit
topic) with the body its documented model describes, and no status is listed that no
request produces. The document validates
as OpenAPI 3.1."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from confluent_kafka.admin import AdminClient
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from openapi_spec_validator import validate

from ledger_lab.harness.approvers import TEST_APPROVER, write_signing_key
from ledger_lab.harness.processes import processor_group
from ledger_lab.harness.stack import Stack
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.outputs import decision_mark
from ledger_stream.gateway import ApiKeys, build_app
from ledger_stream.gateway.groups import GROUPS
from ledger_stream.kafka import topics
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.sdk.client import AsyncLedgerClient
from tests.gateway.support import ACME, ACME_AGENT, GLOBEX, intent

pytestmark = pytest.mark.timeout(300)

# Routes kept out of the document: the pages that show it and the console, and their assets.
PAGES = frozenset({"/openapi.json", "/docs", "/redoc", "/docs/assets/{path}", "/console"})
UNKNOWN_KEY = "nobody-key-0123456789abcdef"
HASH = "ab" * 32


@dataclasses.dataclass(frozen=True)
class Call:
    """One request, to the gateway on the test's broker (``live``) or to one whose Kafka
    cannot be reached (``down``); ``before`` runs first (it writes what the call needs)."""

    method: str
    path: str
    key: str | None = ACME
    body: Any = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    gateway: str = "live"
    before: Callable[[], None] | None = None


def keys() -> ApiKeys:
    return ApiKeys.parse(f"acme:operator:ops-ann={ACME}\nglobex:operator:ops-eve={GLOBEX}\n"
                         f"acme:agent={ACME_AGENT}")


def app_on(settings: Settings, bootstrap: str) -> tuple[FastAPI, AsyncLedgerClient]:
    client = AsyncLedgerClient(settings, bootstrap=bootstrap)
    return build_app(client, keys()), client


@pytest.fixture
def unaudited(stack: Stack) -> Iterator[Settings]:
    """Ledger topics of their own on the test's broker, but for the audit topic; no
    processor reads them."""
    settings = stack.settings.model_copy(update={"topic_prefix": f"t-{uuid.uuid4().hex[:8]}"})
    topics.require_matching(topics.create_topics(stack.bootstrap, settings))
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    names = [spec.name for spec in topics.ledger_topics(settings)]
    admin.delete_topics([settings.topic("audit")], operation_timeout=30)[
        settings.topic("audit")].result()
    yield settings
    others = [name for name in names if name != settings.topic("audit")]
    for future in admin.delete_topics(others, operation_timeout=30).values():
        future.result()


@pytest.fixture
def gateways(stack: Stack, unaudited: Settings,
             tmp_path: Path) -> Iterator[dict[str, TestClient]]:
    """The app on the test's broker and processor (as a peer on this host, which may read
    /metrics), the app with a Kafka that cannot be reached, and the app on topics without
    the audit topic."""
    signing = write_signing_key(TEST_APPROVER, tmp_path)
    live_settings = stack.settings.model_copy(update={
        "approval_signing_key": signing, "consumer_group": processor_group(stack.settings)})
    apps = {"live": app_on(live_settings, stack.bootstrap),
            "down": app_on(Settings(approval_signing_key=signing), "127.0.0.1:1"),
            "unaudited": app_on(unaudited.model_copy(update={"approval_signing_key": signing}),
                                stack.bootstrap)}
    try:
        yield {name: TestClient(app, raise_server_exceptions=False,
                                client=("127.0.0.1", 50000) if name == "live" else
                                ("testclient", 50000)) for name, (app, _) in apps.items()}
    finally:
        for _, client in apps.values():
            client.client.close()


def send(clients: dict[str, TestClient], call: Call) -> httpx.Response:
    if call.before is not None:
        call.before()
    headers = dict(call.headers)
    if call.key is not None:
        headers["Authorization"] = f"Bearer {call.key}"
    return clients[call.gateway].request(call.method, call.path, json=call.body,
                                         headers=headers)


def waiting_receipt(settings: Settings, key: str, detail: str = "") -> Callable[[], None]:
    """Writes what the processor writes for a key whose outcome is unknown (``detail``
    empty) or, naming a decision, for that decision applied."""
    def write() -> None:
        producer = EventProducer(settings, settings.kafka_bootstrap)
        status = ev.ReceiptStatus.FAILED if detail else ev.ReceiptStatus.NEEDS_RECONCILIATION
        producer.send("receipts", ev.Receipt(
            uuid.uuid4().hex, key, "i1", status,
            ev.Reason.OPERATOR if detail else ev.Reason.NONE, "h" * 64, 1,
            1_796_000_000_000, detail=detail, key_status=status))
        producer.flush()
    return write


def probes(settings: Settings) -> dict[tuple[str, str], dict[int, Call]]:
    """For each documented operation, one request a status."""
    seen, fresh, theirs = (f"acme/refund/{uuid.uuid4().hex[:8]}",
                           f"acme/refund/{uuid.uuid4().hex[:8]}", "globex/refund/g-1")
    waiting, decision_id = f"acme/refund/{uuid.uuid4().hex[:8]}", f"d-{uuid.uuid4().hex[:8]}"
    decision = {"resolution": "failed", "attempt": 1, "reason": "checked the target",
                "decision_id": decision_id}
    freeze = {"action": "payout", "reason": "INC-7"}
    approval = {"key": "acme/payout/p-1", "args_hash": HASH}
    reads = {}
    for route in ("operations", "timeline", "evidence"):
        reads[("get", f"/v1/{route}/{{key}}")] = {
            200: Call("GET", f"/v1/{route}/{seen}"), 400: Call("GET", f"/v1/{route}/acme-only"),
            401: Call("GET", f"/v1/{route}/{seen}", key=None),
            403: Call("GET", f"/v1/{route}/{theirs}"), 404: Call("GET", f"/v1/{route}/{fresh}"),
            503: Call("GET", f"/v1/{route}/{seen}", gateway="down")}
    return {
        ("get", "/healthz"): {200: Call("GET", "/healthz", key=None)},
        ("get", "/metrics"): {
            200: Call("GET", "/metrics", key=None),
            403: Call("GET", "/metrics", key=None, headers={"X-Forwarded-For": "192.0.2.9"})},
        ("post", "/v1/intents"): {
            200: Call("POST", "/v1/intents", body=intent(seen)),
            # No processor reads the unaudited topics: nothing answers within the wait (a
            # wait of 0 would leave Kafka half a second to acknowledge the intent).
            202: Call("POST", "/v1/intents", body=intent(fresh, wait=3), gateway="unaudited"),
            400: Call("POST", "/v1/intents", body={**intent(fresh), "action": "payout"}),
            401: Call("POST", "/v1/intents", key=None, body=intent(fresh)),
            403: Call("POST", "/v1/intents", body=intent(theirs)),
            422: Call("POST", "/v1/intents", body={**intent(fresh), "wait_seconds": 500}),
            503: Call("POST", "/v1/intents", body=intent(fresh, wait=0), gateway="down")},
        **reads,
        ("get", "/v1/alerts"): {
            200: Call("GET", "/v1/alerts"), 400: Call("GET", "/v1/alerts?kind=nope"),
            401: Call("GET", "/v1/alerts", key=None),
            422: Call("GET", "/v1/alerts?limit=0"),
            503: Call("GET", "/v1/alerts", gateway="down")},
        ("get", "/v1/reconciliation"): {
            200: Call("GET", "/v1/reconciliation"),
            401: Call("GET", "/v1/reconciliation", key=None),
            503: Call("GET", "/v1/reconciliation", gateway="down")},
        ("post", "/v1/reconciliation/{key}"): {
            202: Call("POST", f"/v1/reconciliation/{waiting}?wait=0", body=decision,
                      before=waiting_receipt(settings, waiting)),
            200: Call("POST", f"/v1/reconciliation/{waiting}?wait=0", body=decision,
                      before=waiting_receipt(settings, waiting, decision_mark(decision_id))),
            400: Call("POST", "/v1/reconciliation/acme-only", body=decision),
            401: Call("POST", f"/v1/reconciliation/{waiting}", key=None, body=decision),
            403: Call("POST", f"/v1/reconciliation/{waiting}", key=ACME_AGENT, body=decision),
            409: Call("POST", f"/v1/reconciliation/{fresh}?wait=0", body=decision),
            422: Call("POST", f"/v1/reconciliation/{waiting}",
                      body={**decision, "reason": ""}),
            503: Call("POST", f"/v1/reconciliation/{waiting}?wait=0", body=decision,
                      gateway="down")},
        ("get", "/v1/freezes"): {
            200: Call("GET", "/v1/freezes"), 401: Call("GET", "/v1/freezes", key=None),
            503: Call("GET", "/v1/freezes", gateway="down")},
        ("post", "/v1/freezes"): {
            201: Call("POST", "/v1/freezes?wait=0", body=freeze),
            400: Call("POST", "/v1/freezes", body={**freeze, "action": "re/fund"}),
            401: Call("POST", "/v1/freezes", key=None, body=freeze),
            403: Call("POST", "/v1/freezes", key=ACME_AGENT, body=freeze),
            422: Call("POST", "/v1/freezes", body={"action": "payout"}),
            503: Call("POST", "/v1/freezes?wait=0", body=freeze, gateway="down")},
        ("delete", "/v1/freezes/{action}"): {
            200: Call("DELETE", "/v1/freezes/payout?wait=0"),
            400: Call("DELETE", "/v1/freezes/payout?operator=mallory"),
            401: Call("DELETE", "/v1/freezes/payout", key=None),
            403: Call("DELETE", "/v1/freezes/payout", key=ACME_AGENT),
            422: Call("DELETE", "/v1/freezes/payout?wait=99"),
            503: Call("DELETE", "/v1/freezes/payout?wait=0", gateway="down")},
        ("get", "/v1/whoami"): {
            200: Call("GET", "/v1/whoami"), 401: Call("GET", "/v1/whoami", key=None)},
        ("get", "/v1/approvals"): {
            200: Call("GET", "/v1/approvals"), 401: Call("GET", "/v1/approvals", key=None),
            503: Call("GET", "/v1/approvals", gateway="down")},
        ("post", "/v1/approvals"): {
            201: Call("POST", "/v1/approvals", body=approval),
            400: Call("POST", "/v1/approvals", body={**approval, "policy_revision": "r\nx"}),
            401: Call("POST", "/v1/approvals", key=None, body=approval),
            403: Call("POST", "/v1/approvals", key=ACME_AGENT, body=approval),
            422: Call("POST", "/v1/approvals", body={**approval, "args_hash": "0" * 10}),
            503: Call("POST", "/v1/approvals", body=approval, gateway="down")},
    }


def audit_probes(unaudited: Settings) -> dict[tuple[str, str], Call]:
    """The operator commands, on topics without the audit topic: each is a 503 and sends
    nothing (its audit record comes first)."""
    waiting = f"acme/refund/{uuid.uuid4().hex[:8]}"
    return {
        ("post", "/v1/reconciliation/{key}"): Call(
            "POST", f"/v1/reconciliation/{waiting}?wait=0", gateway="unaudited",
            before=waiting_receipt(unaudited, waiting),
            body={"resolution": "failed", "attempt": 1, "reason": "checked"}),
        ("post", "/v1/freezes"): Call("POST", "/v1/freezes?wait=0", gateway="unaudited",
                                      body={"action": "refund", "reason": "INC-7"}),
        ("delete", "/v1/freezes/{action}"): Call("DELETE", "/v1/freezes/refund?wait=0",
                                                 gateway="unaudited"),
        ("post", "/v1/approvals"): Call("POST", "/v1/approvals", gateway="unaudited",
                                        body={"key": "acme/payout/p-1", "args_hash": HASH})}


def documented(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(method, path): operation for path, item in schema["paths"].items()
            for method, operation in item.items()}


def check_body(schema: dict[str, Any], operation: dict[str, Any], status: int,
               answer: httpx.Response) -> None:
    """``answer``'s body is what the document's model for ``status`` describes, and it
    carries the headers the document names."""
    documented_answer = operation["responses"][str(status)]
    named = {name.lower() for name in documented_answer.get("headers", {})}
    assert named <= set(answer.headers.keys()), answer.headers  # httpx: lower case
    content = documented_answer.get("content", {})
    if "application/json" not in content:
        media = answer.headers["content-type"].split(";")[0]
        assert media in {name.split(";")[0] for name in content}, answer.headers
        return
    model = {**content["application/json"]["schema"], "components": schema["components"]}
    jsonschema.Draft202012Validator(model).validate(answer.json())


def test_the_route_table_is_documented_in_groups_the_help_names(
        capsys: pytest.CaptureFixture[str]) -> None:
    app, client = app_on(Settings(), "127.0.0.1:1")
    try:
        schema = app.openapi()
    finally:
        client.client.close()
    validate(schema)  # OpenAPI 3.1, by openapi-spec-validator
    table = [(route.path_format or route.path, route.methods or set())
             for route in iter_route_contexts(app.routes)]  # the included routers' too
    routes = {(method.lower(), path) for path, methods in table if path not in PAGES
              for method in methods if method != "HEAD"}
    assert routes == set(documented(schema))
    assert {path for path, _ in table} >= PAGES
    used = {tag for op in documented(schema).values() for tag in op["tags"]}
    assert used == {group.name for group in GROUPS} == {t["name"] for t in schema["tags"]}
    with pytest.raises(SystemExit):
        main(["api", "--help"])
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()
              if line.startswith("  ") and line.split()[0] in used]
    assert sorted(listed) == sorted(used)  # one line each


def test_every_documented_status_is_produced_and_every_produced_one_documented(
        gateways: dict[str, TestClient], stack: Stack, unaudited: Settings) -> None:
    live = gateways["live"]
    schema = live.get("/openapi.json").json()
    validate(schema)
    operations = documented(schema)
    table = probes(stack.settings)
    assert set(table) == set(operations)
    for op, calls in table.items():
        assert set(calls) == {int(s) for s in operations[op]["responses"]}, op

    # An action frozen in approval mode: the processor answers an intent at once (rejected
    # for a missing approval), so that a submit is answered (200) without a connector.
    frozen = send(gateways, Call("POST", "/v1/freezes?wait=30", body={
        "action": "refund", "reason": "probe", "mode": "approval"}))
    assert frozen.status_code == 201 and frozen.json()["in_force"], frozen.text

    down = [(op, status, call) for op, calls in table.items()
            for status, call in calls.items() if call.gateway == "down"]
    down += [(op, "audit", call) for op, call in audit_probes(unaudited).items()]
    with ThreadPoolExecutor(len(down)) as pool:  # each waits out a Kafka timeout
        answers: dict[tuple[Any, Any], httpx.Response] = dict(zip(
            [(op, status) for op, status, _ in down],
            pool.map(lambda d: send(gateways, d[2]), down), strict=True))
    for op in audit_probes(unaudited):
        answer = answers[(op, "audit")]
        assert answer.status_code == 503 and "audit record" in answer.json()["detail"], op
        check_body(schema, operations[op], 503, answer)
    for op, calls in table.items():
        for status, call in calls.items():  # in the table's order: a 202 before its 200
            answer = answers.get((op, status)) or send(gateways, call)
            assert answer.status_code == status, (op, status, answer.text)
            check_body(schema, operations[op], status, answer)
    check_security(gateways, operations)


def check_security(gateways: dict[str, TestClient],
                   operations: dict[tuple[str, str], dict[str, Any]]) -> None:
    """No security: answered without a key. Any key: an unknown key is a 401 and an agent's
    key is let through. The operator role: an agent's key is a 403."""
    for (method, path), operation in operations.items():
        url = path.replace("{key}", "acme/refund/k-1").replace("{action}", "payout")
        (requirement,) = operation["security"] or [{}]
        roles = requirement.get("apiKey")
        answer = send(gateways, Call(method.upper(), url, key=UNKNOWN_KEY))
        if roles is None:
            assert answer.status_code == 200, (method, path)
            continue
        assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Bearer"
        agent = send(gateways, Call(method.upper(), url, key=ACME_AGENT, body={}))
        assert (agent.status_code == 403) == (roles == ["operator"]), (method, path, agent)
