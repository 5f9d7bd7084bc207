"""The console shows the observed-step flag that ``inspect`` and ``GET /v1/timeline`` show:
on the real stack (broker, processor, HTTP connector, sandbox, gateway) in headless
Chromium, a key asked for by a run and by a replay of its thread whose model answered
differently opens with a flag line in its summary, its replay's intent row marked and
saying ``FLAGGED observation_changed: model ...`` with what each step observed, and the
replay's mark ringed in the picture. The first run's row shows what it observed, unflagged."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from ledger_lab.harness.stack import Stack
from ledger_stream.domain import events as ev
from ledger_stream.domain.observations import observe
from ledger_stream.sdk import LedgerClient
from tests.console_browser import console_page, overflow, shot
from tests.gateway.support import ACME, new_key

FLAGGED = re.compile(r"\bflagged\b")


def test_the_console_flags_a_rerun_that_observed_something_else(
        gateway: str, stack: Stack, tmp_path: Path) -> None:
    key = new_key()
    workflow = ev.Workflow("billing-bot", "3.1", thread_id="t-obs", node="tools")
    first, other = (observe("model", {"say": text}, model="fake-1")
                    for text in ("refund in full", "refund 12.50"))
    with LedgerClient(stack.settings) as client:
        for origin, seen in ((ev.Origin.FRESH, first), (ev.Origin.REPLAY, other)):
            client.submit(client.intent(key, "refund", "payments", {"amount": 4200},
                                        workflow=workflow, origin=origin,
                                        observations=(seen,)), wait=60)
    problems: list[str] = []
    with console_page(gateway, ACME, width=1280, problems=problems) as page:
        page.fill("#key", key)
        page.click("#search-form button")
        expect(page.locator("#key-state")).to_have_text("succeeded", timeout=30_000)
        expect(page.locator("#operation p.flag")).to_contain_text(
            "1 intent(s) of a re-run read something else", timeout=20_000)
        intents = page.locator("#timeline tbody tr", has_text="Intent")
        expect(intents).to_have_count(2)
        expect(intents.nth(0)).not_to_have_class(FLAGGED)
        expect(intents.nth(0)).to_contain_text(f"observed model fake-1 {first.digest[:12]}")
        expect(intents.nth(1)).to_have_class(FLAGGED)
        flag = intents.nth(1).locator(".flag")
        expect(flag).to_contain_text("FLAGGED observation_changed: model "
                                     f"{other.digest[:12]}")
        expect(flag).to_contain_text(f"first {first.digest[:12]}")
        expect(page.locator("#picture svg .mark.flagged")).to_have_count(1)
        expect(page.locator("#picture svg .flag-note")).to_have_text("observed differently")
        assert overflow(page)[0] <= 1280, overflow(page)
        shot(page, tmp_path, "observed-flag")
    assert problems == []
