"""The operator console's layout and empty states in headless Chromium on the real stack:
from 1280 to 1920 px wide the page has no horizontal overflow and the queue stays readable
(no one-word-per-line column), times read as "… ago" and ISO 8601, never epoch
milliseconds; before a known API key is entered nothing is shown (never "nothing waits"),
and a change of key leaves nothing of what the previous key read. Screenshots as in
test_console.py (LEDGER_SCREENSHOTS)."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from ledger_lab.harness.operator import waiting_for_operator
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.gateway import ApiKeys, build_app
from ledger_stream.sdk.client import AsyncLedgerClient
from tests.console_browser import console_page, enter_key, overflow, shot
from tests.gateway.support import ACME, ACME_AGENT, GLOBEX, curl, intent, new_key

pytestmark = pytest.mark.timeout(240)
EPOCH_MS = re.compile(r"\b1\d{12}\b")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def test_console_fits_1280_to_1920_px_with_a_readable_queue(gateway: str, stack: Stack,
                                                            tmp_path: Path) -> None:
    folder = Path(os.environ.get("LEDGER_SCREENSHOTS") or tmp_path)
    paid = new_key()
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(paid))[0] == 200
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(paid, amount=1))[0] == 200
    # Keys an operator must decide, one with characters a URL would cut unencoded.
    waiting = [f"acme/email/{uuid.uuid4().hex[:8]}?dup#x%2F",
               f"acme/send-customer-notification/{uuid.uuid4().hex}"]
    for key in waiting:
        waiting_for_operator(stack.settings, key)
    for width in (1280, 1920):
        with console_page(gateway, ACME, width=width) as page:
            for key in waiting:
                expect(page.locator("#reconciliation tbody")).to_contain_text(
                    key, timeout=30_000)
            expect(page.locator("#alerts tbody")).to_contain_text(paid, timeout=20_000)
            page.fill("#key", paid)
            page.click("#search-form button")
            expect(page.locator("#timeline tbody tr").first).to_contain_text(
                "Intent", timeout=20_000)
            page.wait_for_timeout(300)
            shot(page, folder, f"layout-{width}")
            scroll_width, inner = overflow(page)
            assert scroll_width <= inner, f"{width} px: the page is {scroll_width} px wide"
            queue_readable(page, waiting)
            human_times(page)


def queue_readable(page: Page, keys: list[str]) -> None:
    """Each waiting key's row is at most three lines high and its key column at least
    180 px wide: no column squeezed to a word per line."""
    for key in keys:
        row = page.locator("#reconciliation tbody tr").filter(has_text=key).first
        height = row.bounding_box()["height"]  # type: ignore[index]
        key_width = row.locator("td").first.bounding_box()["width"]  # type: ignore[index]
        assert height <= 64 and key_width >= 180, (key, height, key_width)


def human_times(page: Page) -> None:
    text = page.inner_text("main")
    found = EPOCH_MS.search(text)
    assert not found, f"epoch milliseconds shown: {text[found.start() - 80:found.end() + 20]}"
    times = page.locator("#reconciliation tbody td").nth(2).inner_text()
    assert re.search(r"ago|just now", times) and ISO.search(times), times


def test_console_without_a_known_key_shows_nothing(gateway: str, tmp_path: Path) -> None:
    """No key, or a key the gateway does not know (401): the console says so and shows no
    list, never "nothing waits", which would tell an operator that nothing needs them; a
    change of key drops what the previous key read (its open key too)."""
    folder = Path(os.environ.get("LEDGER_SCREENSHOTS") or tmp_path)
    key = new_key()
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(key))[0] == 200
    with console_page(gateway, "", width=1280) as page:
        expect(page.locator("#status")).to_contain_text("enter an API key")
        for empty in ("#reconciliation-empty", "#freezes-empty", "#approvals-empty"):
            expect(page.locator(empty)).to_be_hidden()

        enter_key(page, ACME)
        expect(page.locator("#status")).to_contain_text("up to date", timeout=20_000)
        expect(page.locator("#reconciliation-empty")).to_be_visible()
        page.fill("#key", key)
        page.click("#search-form button")
        expect(page.locator("#timeline tbody tr").first).to_contain_text("Intent",
                                                                         timeout=20_000)

        enter_key(page, "not-a-key-this-gateway-knows")
        expect(page.locator("#status")).to_contain_text("not known (401)", timeout=20_000)
        assert key not in page.inner_text("body"), "the previous key's data is still shown"
        expect(page.locator("#key")).to_have_value("")
        nothing_shown(page)
        shot(page, folder, "unknown-key")

        enter_key(page, GLOBEX)  # another tenant's operator
        expect(page.locator("#status")).to_contain_text("up to date", timeout=20_000)
        assert key not in page.inner_text("body"), "another tenant's key is still shown"
        expect(page.locator("#reconciliation-empty")).to_be_visible()

        enter_key(page, "")
        expect(page.locator("#status")).to_contain_text("enter an API key")
        nothing_shown(page)


def nothing_shown(page: Page) -> None:
    """No list, no count, no open key: a banner that says why."""
    for empty in ("#reconciliation-empty", "#freezes-empty", "#approvals-empty"):
        expect(page.locator(empty)).to_be_hidden()
    expect(page.locator("#auth-needed")).to_be_visible()
    expect(page.locator("#timeline")).to_be_hidden()
    for section in ("#reconciliation", "#approvals", "#containment", "#alerts"):
        expect(page.locator(f"{section} tbody tr")).to_have_count(0)
        expect(page.locator(f"{section} .count")).to_have_text("–")
        expect(page.locator(f"{section} .unread")).to_be_visible()


def test_the_console_loads_nothing_from_another_host_and_asks_who_the_key_is() -> None:
    """Its scripts and styles come from the gateway (no CDN); ``/v1/whoami`` names the
    key's tenant and operator (empty for an agent's key), 401 for an unknown key."""
    client = AsyncLedgerClient(Settings(), bootstrap="127.0.0.1:1")
    try:
        tc = TestClient(build_app(client, ApiKeys.parse(
            f"acme:operator:ops-ann={ACME},acme:agent={ACME_AGENT}")))
        page = tc.get("/console").text
        assets = [a for a in re.findall(r'(?:src|href)="([^"]+)"', page)
                  if not a.startswith("#")]
        assert assets and all(a.startswith("/console/assets/") for a in assets), assets
        served = [tc.get(a) for a in assets]
        assert [r.status_code for r in served] == [200] * len(assets)
        for text in [page] + [r.text for r in served]:
            assert set(re.findall(r"\w+://[^\"' )]+", text)) <= {
                "http://www.w3.org/2000/svg"}  # the SVG namespace: a name, never fetched
        who = {k: tc.get("/v1/whoami", headers={"Authorization": f"Bearer {k}"})
               for k in (ACME, ACME_AGENT, "unknown-key")}
        assert who[ACME].json()["tenant"] == "acme" and who[ACME].json()["operator"] == "ops-ann"
        assert who[ACME_AGENT].json()["operator"] == ""
        assert who["unknown-key"].status_code == 401
    finally:
        client.client.close()
