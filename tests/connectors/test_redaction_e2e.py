"""A card number in a target's error appears nowhere in the ledger, end to end.

The payments sandbox declines with ``card 4111 1111 1111 1111 declined`` in its 402 body,
and a PostgreSQL effect raises a serialization failure whose message holds the number; the
real processor, HTTP and PostgreSQL connectors (processes) and the broker carry the keys to
their end. Then the number is looked for in every record of every ledger topic (raw bytes,
uncommitted ones included), ``inspect``, the evidence file, the view's and the gateway's JSON
answers, the console as headless Chromium renders it, and every process's log.

A second test writes what a connector wrote before failures were summarised (the target's
text in the outcome and the lookup's error): the topics hold the number, and no reader
shows it.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from playwright.sync_api import expect

from ledger_lab.harness.operator import waiting_for_operator
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import TERMINAL, Stack
from ledger_lab.harness.view import ServedView
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from tests.console_browser import console_page
from tests.gateway.support import ACME, curl, intent, serve_gateway

pytestmark = pytest.mark.timeout(300)

PAN = "4111 1111 1111 1111"
# The number with any separators (spaces, dashes, none), in text or in bytes.
FOUND = re.compile(r"4111\D{0,3}1111\D{0,3}1111\D{0,3}1111")
DECLINE_SQL = (
    "create function ledger_decline(amount int) returns int language plpgsql as $$ begin "
    f"raise exception 'card {PAN} declined (amount %)', amount using errcode = '40001'; "
    "end $$")


def common(settings: Settings) -> list[str]:
    assert settings.kafka_bootstrap
    return ["--bootstrap", settings.kafka_bootstrap, "--topic-prefix", settings.topic_prefix]


def every_record(settings: Settings) -> Iterator[tuple[str, bytes]]:
    """(topic, key, value and headers) of every record of every topic of this test's ledger, read
    uncommitted (aborted transactions' records too)."""
    assert settings.kafka_bootstrap
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap,
                         "group.id": f"scan-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "isolation.level": "read_uncommitted",
                         "enable.partition.eof": True})
    try:
        topics = [t for t in consumer.list_topics(timeout=10).topics
                  if t.startswith(settings.topic_prefix + ".")]
        assert len(topics) >= 7, topics
        for topic in topics:
            for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, p, low)])
                while True:  # to the end: the last offsets may be transaction markers
                    msg = consumer.poll(10)
                    assert msg is not None, f"{topic}[{p}] not read to its end"
                    if msg.error():
                        assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                        break
                    yield topic, b"|".join([msg.key() or b"", msg.value() or b"", *(
                        v or b"" for _, v in msg.headers() or [])])
    finally:
        consumer.close()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read().decode("utf-8")


def console_pages(gateway: str, keys: dict[str, str], shots: Path) -> list[str]:
    """The console's HTML as Chromium renders it, once per key shown (after its state)."""
    pages: list[str] = []
    with console_page(gateway, ACME) as page:
        for key, state in keys.items():
            page.fill("#key", key)
            page.click("#search-form button")
            expect(page.locator("#key-state")).to_have_text(state, timeout=30_000)
            expect(page.locator("#timeline tbody tr").first).to_contain_text("Intent")
            if state == "needs_reconciliation":
                expect(page.locator("#reconciliation tbody")).to_contain_text(key,
                                                                              timeout=30_000)
                expect(page.locator("#alerts tbody")).to_contain_text(key, timeout=30_000)
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / f"redaction-{len(pages)}.png"), full_page=True)
            pages.append(page.content())
    return pages


def readers(stack: Stack, gateway: str, keys: list[str], tmp_path: Path,
            capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """What every reader answers about ``keys``, by surface."""
    shown: dict[str, list[str]] = {}
    view = ServedView(stack.settings, tmp_path / "view")
    try:
        for n, key in enumerate(keys):
            for how in (["--json"], []):
                assert main(["inspect", key, *how, *common(stack.settings)]) == 0
                shown.setdefault("inspect", []).append(capsys.readouterr().out)
            for how in (["--json"], []):
                assert main(["receipts", key, *how, *common(stack.settings)]) == 0
                shown.setdefault("receipts", []).append(capsys.readouterr().out)
            out = tmp_path / f"evidence-{n}.json"
            assert main(["evidence", key, "--out", str(out), *common(stack.settings)]) == 0
            shown.setdefault("evidence file", []).append(out.read_text())
            quoted = quote(key, safe="")
            shown.setdefault("view", []).extend(
                get(f"{view.url}/v1/{what}/{quoted}")
                for what in ("operations", "timeline", "evidence"))
            for path in (f"/v1/operations/{quoted}", f"/v1/timeline/{quoted}",
                         f"/v1/evidence/{quoted}"):
                shown.setdefault("gateway", []).append(
                    json.dumps(curl("GET", f"{gateway}{path}", ACME)))
        for command in (["alerts"], ["alerts", "--json"], ["reconcile", "list"],
                        ["reconcile", "list", "--json"]):
            main([*command, *common(stack.settings)])
            shown.setdefault("alerts, reconcile", []).append(capsys.readouterr().out)
        for path in ("/v1/alerts", "/v1/reconciliation"):
            shown["gateway"].append(json.dumps(curl("GET", f"{gateway}{path}", ACME)))
    finally:
        view.close()
    capsys.readouterr()
    return {surface: "\n".join(texts) for surface, texts in shown.items()}


@pytest.fixture
def gateway(stack: Stack, tmp_path: Path) -> Iterator[str]:
    yield from serve_gateway(stack.settings, tmp_path)


@pytest.fixture
def declining_dsn(postgres_dsn: str) -> str:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(DECLINE_SQL)
    return postgres_dsn


def test_a_card_number_in_a_targets_error_appears_nowhere(
        stack: Stack, sandbox: SandboxProc, declining_dsn: str, gateway: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url, "--deduplicates")
    stack.connector("postgres", "--name", "ledger-db", "--dsn", declining_dsn,
                    "--effect-sql", "select ledger_decline(%(amount)s)")
    declined = f"acme/refund/{uuid.uuid4().hex[:10]}"
    sandbox.set_fault("decline", key=declined, message=f"card {PAN} declined")
    code, answer = curl("POST", f"{gateway}/v1/intents", ACME, intent(declined))
    assert code == 200, answer
    leaks = ["the gateway's answer"] if FOUND.search(json.dumps(answer)) else []
    raised = f"acme/refund/{uuid.uuid4().hex[:10]}"
    stack.submit(raised, {"amount": 7}, "ledger-db")

    refused = stack.await_key(declined, TERMINAL)
    assert (refused.key_status, refused.reason) == (ev.ReceiptStatus.FAILED,
                                                    ev.Reason.TARGET_REJECTED)
    assert [r["result"] for r in sandbox.ledger()["requests"]
            if r["idempotency_key"] == declined] == ["fault:decline"]
    exhausted = stack.await_key(raised, TERMINAL, timeout_s=120)
    assert (exhausted.key_status, exhausted.reason) == (ev.ReceiptStatus.FAILED,
                                                        ev.Reason.MAX_ATTEMPTS)
    # Five attempts called the database; on a loaded machine a claim whose grant came too
    # late for its lease is not called (``not_called``) and does not count: one more.
    assert exhausted.attempts >= 5

    records = list(every_record(stack.settings))
    assert sum(declined.encode() in r for _, r in records) >= 5  # the scan sees the keys
    leaks += sorted({f"topic {topic}" for topic, r in records
                     if FOUND.search(r.decode("utf-8", "replace"))})

    surfaces = readers(stack, gateway, [declined, raised], tmp_path, capsys)
    surfaces["console"] = "\n".join(console_pages(
        gateway, {declined: "failed", raised: "failed"}, tmp_path / "shots"))
    logs = {p.log.name: p.log.read_text(errors="replace") for p in stack.procs}
    logs["api.log"] = (tmp_path / "api.log").read_text(errors="replace")
    logs["in-process"] = "\n".join(f"{r.getMessage()} {vars(r)}" for r in caplog.records)
    assert any("ledger-db" in text for text in logs.values())
    leaks += [surface for surface, text in surfaces.items() if FOUND.search(text)]
    leaks += [f"log {name}" for name, text in logs.items() if FOUND.search(text)]
    assert leaks == [], f"the card number is shown by {leaks}"
    assert "characters withheld" in surfaces["console"]
    # What is kept instead: the status and the body's length; the SQLSTATE and the phase.
    assert re.fullmatch(r"Refused \[HTTP 402 \(refused\), body: \d+ characters withheld\]",
                        refused.detail), refused.detail
    assert "PostgresNotApplied [" in exhausted.detail and "sqlstate=40001" in exhausted.detail


def test_an_old_records_target_text_is_shown_by_no_reader(
        stack: Stack, gateway: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Records written before connectors summarised their failures still quote the target;
    every reader shows that text as its length."""
    key = f"acme/email/{uuid.uuid4().hex[:10]}"
    old = f'Refused: HTTP 402 (refused): {{"error": "card_declined", "message": "card {PAN}"}}'
    receipt = waiting_for_operator(stack.settings, key, error=old)
    assert FOUND.search(receipt.detail)  # the topics hold it, as old records do

    surfaces = readers(stack, gateway, [key], tmp_path, capsys)
    surfaces["console"] = "\n".join(console_pages(
        gateway, {key: "needs_reconciliation"}, tmp_path / "shots"))
    leaks = [surface for surface, text in surfaces.items() if FOUND.search(text)]
    assert leaks == [], f"the card number is shown by {leaks}"
    for surface, text in surfaces.items():
        assert f"[target text withheld: {len(old)} characters]" in text, surface
