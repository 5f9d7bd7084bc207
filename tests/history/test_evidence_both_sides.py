"""``ledger-stream evidence --checkpointer --target --report`` on a real refund agent (a
LangGraph graph with a SQLite or PostgreSQL checkpointer, worker processes SIGKILLed at a
failpoint and resumed), a real broker, processor and connector, and the payments sandbox:
the document holds both checkpoints around the step, the target's receipt by key, and no
argument value anywhere."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ledger_lab.harness.agents import AgentWorld, agent_world
from ledger_stream.cli.main import main
from ledger_stream.config import Settings

pytestmark = pytest.mark.timeout(300)

AMOUNT = "8642.17"  # the refund's argument: it must appear nowhere in the evidence


def _common(s: Settings) -> list[str]:
    assert s.kafka_bootstrap
    return ["--bootstrap", s.kafka_bootstrap, "--topic-prefix", s.topic_prefix]


def _crashed_and_resumed(world: AgentWorld) -> tuple[str, str]:
    """A refund whose worker is SIGKILLed after the ledger's receipt, before the tools step
    is checkpointed, and then resumed by a new worker."""
    thread, invoice = f"t-{uuid.uuid4().hex[:6]}", f"inv-{uuid.uuid4().hex[:6]}"
    start = world.worker(thread, "start", "--invoice", invoice, "--amount", AMOUNT)
    assert start.returncode == 0, start.log
    killed = world.worker(thread, "approve", failpoint="after_receipt")
    assert killed.returncode == -9, killed.log
    resumed = world.worker(thread, "resume")
    assert resumed.returncode == 0, resumed.log
    return thread, invoice


def _assert_no_arguments(*texts: str) -> None:
    for text in texts:
        assert AMOUNT not in text
        assert not re.search(r"(?<![0-9A-Za-z_])8642(?![0-9A-Za-z_])", text)


def _evidence(world: AgentWorld, key: str, tmp_path: Path, target: str
              ) -> tuple[dict[str, Any], str, str]:
    out, report = tmp_path / "evidence.json", tmp_path / "evidence.md"
    assert main(["evidence", key, "--out", str(out), "--report", str(report),
                 "--checkpointer", world.db, "--target", target,
                 *_common(world.stack.settings)]) == 0
    text = out.read_text()
    return json.loads(text), text, report.read_text()


def _assert_both_checkpoints(doc: dict[str, Any], thread: str) -> dict[str, Any]:
    (side,) = doc["workflow"]["threads"]
    assert (side["thread_id"], side["graph"], side["version"]) == (thread, "refund-agent", "1.0")
    assert side["thread_config"] == {"thread_id": thread, "checkpoint_ns": ""}
    (step,) = side["steps"]  # the crashed try and the resume ran the same step
    assert step["node"] == "issue_refund"  # the tool that asked
    assert [i["origin"] for i in step["intents"]] == ["fresh", "resume"]
    before, (after,) = step["before"], step["after"]
    assert before["checkpoint_id"] == step["checkpoint_id"] and before["next"] == ["tools"]
    assert after["parent_checkpoint_id"] == before["checkpoint_id"]
    assert after["next"] == ["model"] and after["step"] == before["step"] + 1
    # The tools task's writes, recorded against the checkpoint it ran from.
    (task,) = before["pending_tasks"]
    assert {"messages", "ledger_receipts"} <= set(task["channels"])
    written = {w["channel"]: w for w in before["pending_writes"]}
    assert written["messages"]["size"] > 0 and len(written["messages"]["digest"]) == 64
    # Digests compare within the document: the receipt the step wrote is the one after it.
    shown = {c["name"]: c for c in after["channels"]}
    assert shown["ledger_receipts"]["digest"] == written["ledger_receipts"]["digest"]
    # The amount's channel is there, but neither its value nor a digest that trying
    # amounts could reverse.
    plain = hashlib.sha256(JsonPlusSerializer().dumps_typed(float(AMOUNT))[1]).hexdigest()
    assert shown["amount"]["digest"] != plain
    return side


def test_a_crashed_and_resumed_refunds_evidence_holds_both_sides(
        ledger_topics: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with agent_world(ledger_topics, tmp_path) as world:
        thread, invoice = _crashed_and_resumed(world)
        key = f"acme/refund/{invoice}"
        (effect,) = world.effects(invoice)
        lookup = f"{world.sandbox.url}/v1/payments/by-key/{{key}}"
        doc, text, report = _evidence(world, key, tmp_path, lookup)

        assert doc["state"] == "succeeded"
        _assert_both_checkpoints(doc, thread)
        assert doc["workflow"]["checkpointer"] == "sqlite"
        target = doc["target_record"]
        assert (target["answer"], target["receipt_id"], target["agrees"]) == (
            "found", effect["id"], True)
        assert target["ledger_receipt_ids"] == [effect["id"]] and target["target"] == "payments"
        _assert_no_arguments(text, report)
        assert f"### Thread `{thread}`" in report and "**found**" in report
        assert "● Intent resume" in report and "agrees with the ledger" in report

        # A target that cannot answer is said to be so, plainly.
        closed = "http://127.0.0.1:9/v1/payments/by-key/{key}"
        doc, text, report = _evidence(world, key, tmp_path, closed)
        assert doc["target_record"]["answer"] == "cannot be queried"
        assert doc["target_record"]["receipt_id"] is None
        assert "**cannot be queried**" in report
        _assert_no_arguments(text, report)
    capsys.readouterr()


@pytest.fixture
def postgres_world(ledger_topics: Settings, tmp_path: Path, postgres_dsn: str
                   ) -> Iterator[AgentWorld]:
    with agent_world(ledger_topics, tmp_path, saver="postgres", dsn=postgres_dsn) as world:
        yield world


def test_the_workflow_side_from_a_postgres_checkpointer(
        postgres_world: AgentWorld, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    thread, invoice = _crashed_and_resumed(postgres_world)
    lookup = f"{postgres_world.sandbox.url}/v1/payments/by-key/{{key}}"
    doc, text, report = _evidence(postgres_world, f"acme/refund/{invoice}", tmp_path, lookup)
    _assert_both_checkpoints(doc, thread)
    assert doc["workflow"]["checkpointer"] == "postgresql"
    assert doc["target_record"]["answer"] == "found"
    _assert_no_arguments(text, report)
    assert "password" not in text  # the DSN is not repeated
    capsys.readouterr()
