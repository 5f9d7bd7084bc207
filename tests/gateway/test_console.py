"""The operator console (``/console`` of ``ledger-stream api``) end to end in headless
Chromium (Debian's ``chromium``, driven by Playwright) against the real stack: broker,
processor, HTTP connector, payments sandbox, a gateway with an approver key.

Every action is driven through the page, never a dialog box: a freeze and an unfreeze
(a refund submitted meanwhile is held, nothing reaches the sandbox, the unfreeze pays it
once), a decision "applied" and a decision "not applied" behind its confirmation (read
back from the attempts topic), an approval (the intent carrying it is paid once), a key
opened (its picture shows the unknown outcome and the lookup that settled it, and a new
record appears without a click), alerts filtered by kind. The page must hold at 1280 and
1920 px without horizontal overflow. Screenshots of each width are kept (LEDGER_SCREENSHOTS
names the folder; default: the test's temporary folder)."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from ledger_lab.harness.approvers import TEST_APPROVER, write_signing_key
from ledger_lab.harness.operator import waiting_for_operator
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.receipts import key_records
from ledger_stream.serde import AvroCodec
from tests.console_browser import console_page, overflow, shot
from tests.gateway.support import ACME, curl, intent, new_key, serve_gateway

pytestmark = pytest.mark.timeout(300)
EPOCH_MS = re.compile(r"\b1\d{12}\b")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


@pytest.fixture
def approving_gateway(ledger_topics: Settings, sandbox: SandboxProc,
                      tmp_path: Path) -> Iterator[tuple[str, Stack]]:
    """The gateway (with an approver key) on the whole stack; payouts need an approval."""
    stack = Stack(ledger_topics, tmp_path,
                  processor_env={"LEDGER_APPROVAL_REQUIRED_ACTIONS": '["payout"]'})
    try:
        stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                        "--deduplicates")
        signing = write_signing_key(TEST_APPROVER, tmp_path)
        served = serve_gateway(ledger_topics, tmp_path,
                               env={"LEDGER_APPROVAL_SIGNING_KEY": str(signing)})
        yield next(served), stack
        next(served, None)
    finally:
        stack.close()


def folder_of(tmp_path: Path) -> Path:
    return Path(os.environ.get("LEDGER_SCREENSHOTS") or tmp_path)


def payout(key: str) -> dict[str, Any]:
    return {**intent(key), "action": "payout"}


def test_console_drives_every_action_without_a_dialog(
        approving_gateway: tuple[str, Stack], sandbox: SandboxProc, tmp_path: Path) -> None:
    gateway, stack = approving_gateway
    paid, dropped, unpaid = new_key(), new_key(), f"acme/payout/{uuid.uuid4().hex[:8]}"
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(paid))[0] == 200
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(paid, amount=1))[0] == 200
    sandbox.set_fault("commit_then_drop", key=dropped)  # paid, but the answer is lost
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(dropped))[0] == 200
    stack.await_key(dropped, {ev.ReceiptStatus.SUCCEEDED})
    assert curl("POST", f"{gateway}/v1/intents", ACME, payout(unpaid))[0] == 200
    applied, redo = (f"acme/email/{uuid.uuid4().hex[:8]}" for _ in range(2))
    for key in (applied, redo):
        waiting_for_operator(stack.settings, key)  # through the processor
    problems: list[str] = []

    with console_page(gateway, ACME, width=1280, problems=problems) as page:
        expect(page.locator("#reconciliation tbody")).to_contain_text(redo, timeout=30_000)
        expect(page.locator("#alerts tbody")).to_contain_text(paid, timeout=30_000)
        freeze_and_unfreeze(page, gateway, stack, sandbox, problems)
        expect(page.locator('#reconciliation .count')).to_have_text("2")
        expect(page.locator('#approvals .count')).to_have_text("1", timeout=20_000)
        decide(page, applied, "applied", "found it in the mail log", "MSG-1")
        expect(page.locator("#decision")).to_contain_text(
            f"recorded: {applied} applied, applied by the ledger", timeout=20_000)
        decide(page, redo, "not_applied", "bounced: never delivered")
        confirm = page.locator("#reconciliation .decide-row .confirm")
        expect(confirm).to_be_visible()
        expect(confirm).to_contain_text("dispatches the effect again")
        assert decisions(stack, redo) == []  # nothing sent before the confirmation
        confirm.locator("button.confirm-yes").click()
        expect(page.locator("#decision")).to_contain_text(
            f"recorded: {redo} not applied, applied by the ledger", timeout=20_000)
        expect(page.locator("#reconciliation-empty")).to_be_visible(timeout=20_000)
        expect(page.locator('#reconciliation .count')).to_have_text("0")
        approval = approve(page, unpaid)
        filter_alerts(page)
        open_key_with_its_picture(page, gateway, dropped)
        for width in (1280, 1920):
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_timeout(300)
            assert overflow(page)[0] <= width, overflow(page)
            shot(page, folder_of(tmp_path), f"{width}")
            page.locator("#picture").screenshot(
                path=str(folder_of(tmp_path) / f"key-picture-{width}.png"))
        assert problems == []

    assert [(d.resolution, d.operator, d.note, d.external_id) for d in decisions(stack, applied)] \
        == [(ev.Resolution.APPLIED, "ops-ann", "found it in the mail log", "MSG-1")]
    assert [(d.resolution, d.note) for d in decisions(stack, redo)] == [
        (ev.Resolution.NOT_APPLIED, "bounced: never delivered")]
    code, answer = curl("POST", f"{gateway}/v1/intents", ACME, {**payout(unpaid),
                                                                "approval": approval})
    assert code == 200 and answer["operation"]["reason"] != "approval", answer
    stack.await_key(unpaid, {ev.ReceiptStatus.SUCCEEDED})
    assert len(sandbox.effects(unpaid)) == 1


def freeze_and_unfreeze(page: Page, gateway: str, stack: Stack, sandbox: SandboxProc,
                        problems: list[str]) -> None:
    """Freeze refunds from the form (an empty reason opens no box: the form asks for it),
    check a refund is held, unfreeze from its row: it is paid once."""
    page.fill("#freeze-action", "refund")
    page.click("#freeze-form button[type=submit]")
    page.wait_for_timeout(500)
    assert problems == [], "the console opened a dialog box instead of a form"
    page.fill("#freeze-reason", "INC-7")
    page.click("#freeze-form button[type=submit]")
    expect(page.locator("#containment-result")).to_contain_text(
        "frozen: acme/refund (hold), in force", timeout=20_000)
    expect(page.locator("#containment tbody")).to_contain_text("INC-7", timeout=20_000)
    expect(page.locator("#containment .count")).to_have_text("1")
    held = new_key()
    code, answer = curl("POST", f"{gateway}/v1/intents", ACME, intent(held))
    assert code == 200 and answer["operation"]["key_status"] == "held", answer
    assert sandbox.effects(held) == []
    page.locator("#containment tr").filter(has_text="acme/refund").locator("button").click()
    expect(page.locator("#containment-result")).to_contain_text("unfrozen: acme/refund",
                                                                timeout=20_000)
    expect(page.locator("#freezes-empty")).to_be_visible(timeout=20_000)
    stack.await_key(held, {ev.ReceiptStatus.SUCCEEDED})
    assert len(sandbox.effects(held)) == 1


def decide(page: Page, key: str, resolution: str, reason: str, external_id: str = "") -> None:
    """Open the key's decision form in the queue, fill it in and submit it."""
    page.locator("#reconciliation tbody tr").filter(has_text=key).locator(
        "button.decide").click()
    form = page.locator("#reconciliation .decide-row form")
    form.locator(f'input[value="{resolution}"]').check()
    if external_id:
        form.locator('input[name="external_id"]').fill(external_id)
    form.locator('input[name="reason"]').fill(reason)
    form.locator("button[type=submit]").click()


def decisions(stack: Stack, key: str) -> list[ev.OperatorResolution]:
    codec = AvroCodec()
    return [e for r in key_records(stack.bootstrap, stack.settings.topic("attempts"), key)
            if isinstance(e := codec.decode(r.value), ev.OperatorResolution)]


def approve(page: Page, key: str) -> dict[str, Any]:
    row = page.locator("#approvals tbody tr").filter(has_text=key)
    expect(row).to_contain_text("payout", timeout=20_000)
    row.locator("select").select_option("3600")
    row.locator("button").click()
    expect(page.locator("#approval-status")).to_contain_text(f"approved {key}", timeout=20_000)
    approval: dict[str, Any] = json.loads(page.locator("#approval-result").text_content() or "")
    assert approval["key_id"] == TEST_APPROVER.key_id
    return approval


def filter_alerts(page: Page) -> None:
    """Alerts newest first; a kind's chip shows only that kind, with its count."""
    rows = page.locator("#alerts tbody tr")
    expect(page.locator("#alerts .count")).not_to_have_text("0")
    kinds = page.locator("#alert-kinds button[data-kind]:not([data-kind=''])")
    assert kinds.count() >= 2, page.locator("#alert-kinds").inner_text()
    conflict = page.locator('#alert-kinds button[data-kind="conflicting_arguments"]')
    conflict.click()
    expect(conflict).to_have_attribute("aria-pressed", "true")
    shown = rows.evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert shown and set(shown) == {"conflicting_arguments"}, shown
    assert conflict.inner_text().endswith(f" {len(shown)}")
    page.locator("#alert-kinds button[data-kind='']").click()
    times = rows.evaluate_all("rows => rows.map(r => Date.parse(r.querySelector('time')"
                              ".dateTime))")
    assert len(times) > len(shown) and times == sorted(times, reverse=True), times


def open_key_with_its_picture(page: Page, gateway: str, key: str) -> None:
    """The key's picture: four lanes, one mark per record, the unknown outcome ringed and
    linked to the lookup that settled it; the table below; a new record shows up live."""
    page.fill("#key", key)
    page.click("#search-form button")
    expect(page.locator("#key-state")).to_have_text("succeeded", timeout=20_000)
    picture, rows = page.locator("#picture svg"), page.locator("#timeline tbody tr")
    expect(rows.first).to_contain_text("Intent")
    labels = picture.locator(".lane-label").all_text_contents()
    assert [label.split(" ")[0] for label in labels] == ["agent", "ledger", "connector",
                                                          "target"], labels
    assert picture.locator(".mark").count() == rows.count() >= 6
    expect(picture.locator(".mark.unknown")).to_have_count(1)
    expect(picture.locator(".mark.lookup.settles")).to_have_count(1)
    expect(picture.locator(".settles-link")).to_have_count(1)
    expect(picture.locator(".note").last).to_contain_text("settled by lookup found")
    before = rows.count()
    # The approval handed to the agent is the API's JSON (its expiry in epoch ms), as is.
    text = page.inner_text("main").replace(page.inner_text("#approval-result"), "")
    found = EPOCH_MS.search(text)
    assert not found, f"epoch milliseconds shown: {text[found.start() - 80:found.end() + 20]}"
    first = page.locator("#timeline time.when").first.inner_text()
    assert re.search(r"ago|just now", first) and ISO.search(first), first
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(key, amount=1))[0] == 200
    page.wait_for_function(  # no click: the open key is read again on its own
        f"document.querySelectorAll('#picture svg .mark').length > {before}", timeout=20_000)
    expect(rows).to_have_count(page.locator("#picture svg .mark").count())
