"""``/docs`` of ``ledger-stream api`` works without the internet: its HTML names no other
host, the gateway serves every asset it names, ``/openapi.json`` declares the bearer scheme,
and headless Chromium, with every request to another host refused, renders the route list
and sends the API key entered with Authorize."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from typing import Any

import pytest
from playwright.sync_api import Request, Route, expect, sync_playwright

from tests.gateway.support import ACME

pytestmark = pytest.mark.timeout(180)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url\s*:\s*["']([^"']+)["']""")


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.status, answer.read()


def referenced(html: str) -> list[str]:
    return [a or b for a, b in REFERENCE.findall(html)]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_name_no_other_host_and_their_assets_are_served(
        bare_gateway: str, page: str) -> None:
    status, raw = get(f"{bare_gateway}{page}")
    html = raw.decode()
    assert status == 200
    urls = referenced(html)
    assert any(u.endswith(".js") for u in urls), html
    assert not re.search(r"https?://|//[a-z]", html.replace("http://www.w3.org", "")), html
    for url in urls:
        asset_status, body = get(f"{bare_gateway}{url}")
        assert asset_status == 200 and body, url


def test_openapi_declares_the_bearer_scheme_on_authenticated_routes(bare_gateway: str) -> None:
    schema: dict[str, Any] = json.loads(get(f"{bare_gateway}/openapi.json")[1])
    assert schema["components"]["securitySchemes"]["apiKey"]["type"] == "http"
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    operations = [op for path in schema["paths"].values() for op in path.values()]
    assert schema["paths"]["/v1/intents"]["post"]["security"] == [{"apiKey": []}]
    assert schema["paths"]["/v1/alerts"]["get"]["security"] == [{"apiKey": []}]
    # Every route takes a key but the public ones, which say so; operator routes name the role.
    assert schema["paths"]["/healthz"]["get"]["security"] == []
    assert schema["paths"]["/v1/freezes"]["post"]["security"] == [{"apiKey": ["operator"]}]
    assert all(op.get("security") in ([], [{"apiKey": []}], [{"apiKey": ["operator"]}])
               for op in operations)
    assert not [p for op in operations for p in op.get("parameters", ())
                if p["in"] == "header" and p["name"].lower() == "authorization"]


def test_docs_render_offline_in_chromium_and_send_the_key(bare_gateway: str) -> None:
    assert CHROMIUM, "Debian's chromium is needed (.ci/run installs it)"
    elsewhere: list[str] = []

    def only_the_gateway(route: Route, request: Request) -> None:
        if request.url.startswith(bare_gateway):
            route.continue_()
        else:
            elsewhere.append(request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.route("**/*", only_the_gateway)
        page.goto(f"{bare_gateway}/docs")
        alerts = page.locator("#operations-alerts-alerts_v1_alerts_get")
        expect(alerts).to_be_visible(timeout=30_000)
        expect(page.locator(".opblock-summary-path", has_text="/v1/intents")).to_be_visible()

        page.click("button.authorize")
        page.fill(".auth-container input", ACME)
        page.click(".auth-btn-wrapper button.authorize")
        page.click("button.btn-done")
        alerts.locator(".opblock-summary").click()
        alerts.locator("button.try-out__btn").click()
        with page.expect_response(lambda r: "/v1/alerts" in r.url) as answer:
            alerts.locator("button.execute").click()
        assert answer.value.status == 200, answer.value.text()
        browser.close()
    assert elsewhere == []
