"""``ledger-stream inspect`` and ``evidence`` on the real broker, processor, HTTP connector
and payments sandbox: the timeline of a refund, a duplicate and a conflicting intent, checked
against the sandbox's own ledger; the evidence file in log order, without the arguments; the
view's timeline equal to reading the topics, kept across a restart."""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_lab.harness.view import ServedView
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.history import Located, timeline

pytestmark = pytest.mark.timeout(180)

SECRET = "card-4242-4242-4242-4242"  # stands for any payment detail in the arguments


def common(s: Settings) -> list[str]:
    assert s.kafka_bootstrap
    return ["--bootstrap", s.kafka_bootstrap, "--topic-prefix", s.topic_prefix]


def test_a_refunds_timeline_and_evidence(stack: Stack, sandbox: SandboxProc, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url, "--deduplicates")
    key = f"acme/refund/{uuid.uuid4().hex[:10]}"
    args = {"amount": 4200, "currency": "EUR", "source": SECRET}
    first = stack.submit(key, args, "payments")
    stack.await_key(key, {ev.ReceiptStatus.SUCCEEDED})
    duplicate = stack.submit(key, args, "payments")
    conflict = stack.submit(key, {**args, "amount": 9999}, "payments")
    stack.await_answer(duplicate)
    stack.await_answer(conflict)
    (effect,) = sandbox.effects(key)  # ground truth: the target's own ledger

    assert main(["inspect", key, "--json", *common(stack.settings)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    events = [r["event"] for r in rows]
    assert events[0] == "Intent" and rows[0]["intent_event_id"] == first.event_id
    assert events.count("Intent") == 3 and events.count("Dispatch") == 1
    outcomes = [r for r in rows if r["event"] == "AttemptOutcome"]
    assert [(o["outcome"], o["external_id"]) for o in outcomes] == [("succeeded", effect["id"])]
    answers = {r["intent_event_id"]: r["receipt"] for r in rows if r["event"] == "Receipt"}
    assert answers[duplicate.event_id] == "succeeded/none"
    assert answers[conflict.event_id] == "rejected/conflict"
    assert any(r["outcome"] == "alert conflicting_arguments" for r in rows)
    assert [r["ledger_time_ms"] for r in rows] == sorted(r["ledger_time_ms"] for r in rows)
    assert all(r["next_state"] in (None, "accepted", "in_progress", "succeeded") for r in rows)
    assert SECRET not in json.dumps(rows)

    assert main(["inspect", key, *common(stack.settings)]) == 0
    table = capsys.readouterr()
    assert table.out.splitlines()[0].startswith("time\ttopic\toffset\tevent")
    assert f"{len(rows)} event(s); the key is succeeded" in table.err

    out = tmp_path / "evidence.json"
    assert main(["evidence", key, "--out", str(out), *common(stack.settings)]) == 0
    text = out.read_text()
    # No argument, in any form: the amount appears nowhere as a value of its own (hex ids
    # and hashes may hold the digits "4200" by chance).
    assert SECRET not in text and not re.search(r"(?<![0-9A-Za-z_])4200(?![0-9A-Za-z_])", text)
    doc = json.loads(text)
    assert doc["key"] == key and doc["state"] == "succeeded" and doc["undecodable"] == 0
    for topic in doc["topics"].values():
        offsets = [r["offset"] for r in topic["records"]]
        assert offsets == sorted(offsets)
    intents = doc["topics"]["intents"]["records"]
    assert intents[0]["event"]["args_json"] == {"redacted": True, "length": len(first.args_json)}
    assert intents[0]["event"]["args_hash"] == first.args_hash
    assert {a["kind"] for a in doc["alerts"]} == {"conflicting_arguments"}
    assert len(doc["timeline"]) == len(rows)

    # The same from the view's timeline: one lookup, equal to reading the topics.
    view = ServedView(stack.settings, tmp_path / "view")
    try:
        via = ["--view-url", view.url, *common(stack.settings)]
        assert main(["inspect", key, "--json", *via]) == 0
        assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == rows
        assert main(["evidence", key, "--out", str(tmp_path / "e2.json"), *via]) == 0
        capsys.readouterr()
        again = json.loads((tmp_path / "e2.json").read_text())
        assert {**again, "generated_at_ms": 0} == {**doc, "generated_at_ms": 0}
    finally:
        view.close()
    assert view.timeline is not None
    positions = view.timeline.all_positions()  # as the stopped thread left them

    # Reopened and not started, the view answers from its store alone (no read of Kafka):
    # the timeline survived the restart, and the positions resume where they were.
    stopped = ServedView(stack.settings, tmp_path / "view", start=False)
    try:
        assert stopped.timeline is not None and stopped.timeline.all_positions() == positions
        with urllib.request.urlopen(f"{stopped.url}/v1/timeline/{quote(key, safe='')}?fresh=0",
                                    timeout=10) as answer:
            body = json.loads(answer.read())
        assert body["rows"] == rows and body["caught_up"] is None
    finally:
        stopped.close()

    # Restarted, it reads on from there: a record written since is in the next answer.
    repeat = stack.submit(key, args, "payments")
    stack.await_answer(repeat)
    view = ServedView(stack.settings, tmp_path / "view")
    try:
        assert main(["inspect", key, "--json", "--view-url", view.url,
                     *common(stack.settings)]) == 0
        fresh = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert main(["inspect", key, "--json", "--scan", "--view-url", view.url,
                     *common(stack.settings)]) == 0
        assert fresh == [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert repeat.event_id in {r["intent_event_id"] for r in fresh}
    finally:
        view.close()


def test_a_key_the_ledger_never_saw_exits_1(ledger_topics: Settings,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    key = f"acme/refund/{uuid.uuid4().hex[:10]}"
    assert main(["inspect", key, *common(ledger_topics)]) == 1
    assert main(["evidence", key, *common(ledger_topics)]) == 1
    assert "no record of" in capsys.readouterr().out


def test_the_timeline_never_orders_by_a_clients_clock() -> None:
    """An intent whose client clock is a day ahead still sorts by its broker timestamp; a
    record that does not decode is a row saying so, not a gap."""
    intent = ev.Intent("i1", "acme/refund/x", "acme", "refund", "payments", "{}", "h" * 64,
                       ev.Workflow("g", "1"), at_ms=2_000_000_000_000)
    receipt = ev.Receipt("r1", "acme/refund/x", "i1", ev.ReceiptStatus.ACCEPTED,
                         ev.Reason.NONE, "h" * 64, 1, 1_000, key_status=ev.ReceiptStatus.ACCEPTED)
    rows = timeline([
        Located("receipts", "p.receipts", 0, 7, 1_000, receipt),
        Located("intents", "p.intents", 0, 3, 1_000, intent),
        Located("attempts", "p.attempts", 0, 4, 1_001, None, "undecodable: bad magic"),
    ])
    assert [(r.event, r.ledger_time_ms) for r in rows] == [
        ("Intent", 1_000), ("Receipt", 1_000), ("undecodable", 1_001)]
    assert rows[2].detail == "undecodable: bad magic" and rows[2].attempt is None
