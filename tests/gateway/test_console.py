"""The operator console (``/console`` of ``ledger-stream api``) end to end in headless
Chromium (Debian's ``chromium``, driven by Playwright) against the real stack: live alerts,
a key's timeline, the reconciliation queue and a decision made with its button, read back
from the attempts topic, and a freeze switched on and off: a refund submitted meanwhile is
held, nothing reaches the sandbox, and the unfreeze pays it once. Each page state is saved
as a screenshot (LEDGER_SCREENSHOTS names the folder; default: the test's temporary
folder)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from ledger_lab.harness.operator import latest_receipt, waiting_for_operator
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.domain import events as ev
from ledger_stream.kafka.receipts import key_records
from ledger_stream.serde import AvroCodec
from tests.console_browser import CHROMIUM, console_page, shot
from tests.gateway.support import ACME, curl, intent, new_key

pytestmark = pytest.mark.timeout(180)

def test_console_shows_alerts_a_timeline_and_records_a_decision(
        gateway: str, stack: Stack, sandbox: SandboxProc, tmp_path: Path) -> None:
    assert CHROMIUM, "Debian's chromium is needed (.ci/run installs it)"
    folder = Path(os.environ.get("LEDGER_SCREENSHOTS") or tmp_path)
    paid = new_key()
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(paid))[0] == 200
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(paid, amount=1))[0] == 200
    # A key an operator must decide, with characters a URL would cut or rewrite unencoded.
    waiting = f"acme/email/{uuid.uuid4().hex[:8]}?dup#x%2F"
    waiting_for_operator(stack.settings, waiting)  # through the processor

    with console_page(gateway, ACME) as page:
        expect(page.locator("#alerts tbody")).to_contain_text(paid, timeout=20_000)
        expect(page.locator("#alerts tbody")).to_contain_text("conflicting_arguments")
        expect(page.locator("#reconciliation tbody")).to_contain_text(waiting)
        shot(page, folder, "queue-and-alerts")

        page.fill("#key", paid)
        page.click("#search-form button")
        expect(page.locator("#key-state")).to_have_text("succeeded", timeout=20_000)
        timeline = page.locator("#timeline tbody tr")
        expect(timeline.first).to_contain_text("Intent")
        assert timeline.count() >= 6
        expect(page.locator("#timeline")).to_contain_text("rejected/conflict")
        shot(page, folder, "timeline")

        answers = iter(["lookup unavailable, customer confirmed no email", "INC-7"])
        page.on("dialog", lambda dialog: dialog.accept(next(answers)))
        row = page.locator("#reconciliation tr").filter(has_text=waiting)
        row.locator('button[data-resolution="failed"]').click()
        expect(page.locator("#decision")).to_contain_text(
            f"recorded: {waiting} failed, applied by the ledger", timeout=20_000)
        shot(page, folder, "decision")

        page.fill("#freeze-action", "refund")
        page.click("#freeze-form button")
        expect(page.locator("#containment-result")).to_contain_text(
            "frozen: acme/refund (hold), in force", timeout=20_000)
        expect(page.locator("#containment tbody")).to_contain_text("INC-7", timeout=20_000)
        held = new_key()
        code, answer = curl("POST", f"{gateway}/v1/intents", ACME, intent(held))
        assert code == 200 and answer["operation"]["key_status"] == "held", answer
        assert sandbox.effects(held) == []
        shot(page, folder, "containment")

        page.locator("#containment tr").filter(has_text="acme/refund").locator(
            "button").click()
        expect(page.locator("#containment-result")).to_contain_text("unfrozen: acme/refund",
                                                                    timeout=20_000)
        expect(page.locator("#freezes-empty")).to_be_visible(timeout=20_000)
        stack.await_key(held, {ev.ReceiptStatus.SUCCEEDED})
        assert len(sandbox.effects(held)) == 1

    codec = AvroCodec()
    (decision,) = [e for r in key_records(stack.bootstrap, stack.settings.topic("attempts"),
                                          waiting)
                   if isinstance(e := codec.decode(r.value), ev.OperatorResolution)]
    assert (decision.resolution, decision.attempt, decision.operator, decision.note) == (
        ev.Resolution.FAILED, 1, "ops-ann", "lookup unavailable, customer confirmed no email")
    settled = latest_receipt(stack.settings, waiting, {ev.ReceiptStatus.FAILED}, timeout_s=5)
    assert f"[decision {decision.event_id}]" in settled.detail


def test_console_without_a_known_key_shows_no_empty_lists(bare_gateway: str,
                                                          tmp_path: Path) -> None:
    """No key, or a key the gateway does not know (401): the console says so and shows no
    list, never "nothing waits", which would tell an operator that nothing needs them."""
    assert CHROMIUM, "Debian's chromium is needed (.ci/run installs it)"
    folder = Path(os.environ.get("LEDGER_SCREENSHOTS") or tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{bare_gateway}/console")
        expect(page.locator("#status")).to_contain_text("enter an API key")
        expect(page.locator("#reconciliation-empty")).to_be_hidden()
        expect(page.locator("#freezes-empty")).to_be_hidden()

        page.fill("#api-key", "not-a-key-this-gateway-knows")
        page.dispatch_event("#api-key", "change")
        expect(page.locator("#status")).to_contain_text("not known (401)", timeout=20_000)
        expect(page.locator("#reconciliation-empty")).to_be_hidden()
        expect(page.locator("#freezes-empty")).to_be_hidden()
        shot(page, folder, "unknown-key")

        page.fill("#api-key", ACME)
        page.dispatch_event("#api-key", "change")
        expect(page.locator("#status")).to_contain_text("up to date", timeout=20_000)
        expect(page.locator("#reconciliation-empty")).to_be_visible()
        browser.close()
