"""The target side and the report of a key's evidence, without a broker: targets behind the
connector's Target interface (fakes of that interface only), and a real SQLite
checkpointer for the workflow side's edge cases."""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt

from connectors.http import HttpTarget
from ledger_stream.cli import evidence_cmd
from ledger_stream.cli.common import CliError
from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target
from ledger_stream.domain.events import OutcomeStatus
from ledger_stream.history.checkpoints import workflow_side
from ledger_stream.history.report import lane_of, markdown
from ledger_stream.history.target_side import target_side

SECRET = "acct-DE89370400440532013000"


class Answering(Target):
    """A target whose lookup answers ``answer`` (or raises it)."""

    def __init__(self, answer: Any, queryable: bool = True) -> None:
        self.name, self.answer, self.queryable = "payments", answer, queryable

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        raise AssertionError("the evidence never applies")

    def classify(self, error: Exception) -> OutcomeStatus:
        return OutcomeStatus.UNKNOWN

    def lookup(self, key: str, timeout_s: float) -> str | None:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[no-any-return]


def test_the_target_side_says_each_answer_plainly() -> None:
    found = target_side(Answering("pay_1"), "acme/refund/a", ["pay_1"])
    assert (found["answer"], found["receipt_id"], found["agrees"]) == ("found", "pay_1", True)
    other = target_side(Answering("pay_2"), "acme/refund/a", ["pay_1"])
    assert other["agrees"] is False
    absent = target_side(Answering(None), "acme/refund/a", ["pay_1"])
    assert (absent["answer"], absent["agrees"]) == ("absent", False)
    no_api = target_side(Answering("pay_1", queryable=False), "acme/refund/a", [])
    assert (no_api["answer"], no_api["receipt_id"]) == ("cannot be queried", None)
    down = target_side(Answering(LookupUnavailable("lookup answered HTTP 503")), "k", [])
    assert down["answer"] == "cannot be queried" and "HTTP 503" in down["why"]
    assert target_side(None, "k", [])["answer"] == "not asked"


def test_a_failing_lookups_own_text_is_not_repeated() -> None:
    """A library error can quote the target's answer: only its class and length are kept."""
    side = target_side(Answering(ValueError(f"declined for {SECRET}")), "k", [])
    assert side["answer"] == "cannot be queried" and side["why"].startswith("ValueError [")
    assert SECRET not in json.dumps(side) and SECRET not in markdown(_doc(target=side))


def _doc(**extra: Any) -> dict[str, Any]:
    return {"key": "acme/refund/a", "generated_at_ms": 0, "state": "succeeded",
            "redaction": "r", "timeline": [], "receipts": [], **extra}


def test_the_report_cannot_be_forged_by_text_a_caller_chose() -> None:
    row = {"event": "Intent", "ledger_time_ms": 0, "origin": "fresh\n## Forged `x`"}
    report = markdown(_doc(timeline=[row], receipts=[
        {"offset": 0, "intent_event_id": "i`\n# Forged", "status": "accepted"}]))
    assert "\n## Forged" not in report and "\n# Forged" not in report
    flagged = markdown(_doc(timeline=[{**row, "origin": "replay", "flag": "model changed"}],
                            observations=[{"intent_event_id": "i2", "origin": "replay",
                                           "observed": [{}], "changed": ["model changed"]}]))
    assert "● Intent FLAGGED replay" in flagged and "**changed**: `model changed`" in flagged
    assert [lane_of(e) for e in ("Intent", "Dispatch", "AttemptClaim", "ReconcileResult")] \
        == [0, 1, 2, 3]


class State(TypedDict, total=False):
    account: str
    answer: str


def _ask(state: State) -> dict[str, Any]:
    return {"answer": str(interrupt({"account": state["account"]}))}


def test_a_step_cut_short_has_no_checkpoint_after_it(tmp_path: Path) -> None:
    """A thread waiting at an interrupt: the step's checkpoint is there, nothing after it,
    the interrupted task is marked, and the interrupt's value (the account) is not shown."""
    builder = StateGraph(State)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    saver = SqliteSaver(sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False))
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"account": SECRET}, config)
    waiting = graph.get_state(config).config["configurable"]["checkpoint_id"]
    rows = [{"event": "Intent", "intent_event_id": "i1", "thread": "t1", "node": "ask",
             "checkpoint": waiting, "origin": "fresh", "workflow": "g@2.1"},
            {"event": "Intent", "intent_event_id": "i2", "thread": "", "checkpoint": ""}]
    side, unnamed = workflow_side(saver, rows)
    assert (side["graph"], side["version"]) == ("g", "2.1")
    (step,) = side["steps"]
    assert step["after"] == [] and "not finished" in step["note"]
    assert step["before"]["next"] == ["ask"]
    (task,) = step["before"]["pending_tasks"]
    assert task["interrupted"] is True
    assert unnamed == {"thread_id": None, "intents": ["i2"],
                       "note": "these intents name no thread: no checkpoint to show"}
    text = json.dumps(side) + markdown(_doc(workflow={"threads": [side, unnamed]}))
    assert SECRET not in text


def test_the_target_flag_names_an_http_lookup_or_a_target() -> None:
    http = evidence_cmd._target("http://127.0.0.1:9/v1/by-key/{key}", "payments")
    assert (http.name, http.queryable) == ("payments", True)
    query = evidence_cmd._target("http://127.0.0.1:9/v1/find?key={key}", "payments")
    assert isinstance(query, HttpTarget) and query.lookup_key_encoding == "query"
    assert isinstance(evidence_cmd._target("ledger_stream.connector.memory:MemoryTarget",
                                           "payments"), Target)
    for wrong in ("http://127.0.0.1:9/v1/by-key", "ledger_stream.connector.target:CANNOT"):
        with pytest.raises(CliError, match="--target"):
            evidence_cmd._target(wrong, "payments")
    for secret in ("http://user:s3cret@127.0.0.1:9/v1/by-key", "https://s3cret@h/{key}"):
        with pytest.raises(CliError, match="credentials") as refused:
            evidence_cmd._target(secret, "payments")
        assert "s3cret" not in str(refused.value)


def test_the_reports_names_and_changes_are_code_spans_not_markdown() -> None:
    """Observation sources (in a change), channel and node names come from the caller's
    intent or graph: outside a code span they could add a link or HTML to the report."""
    forged = "<img src=x onerror=alert(1)> [pay here](http://evil.example)"
    cp = {"checkpoint_id": "c1", "step": 1, "source": "loop", "ts": "t", "next": [forged],
          "channels": [{"name": forged, "size": 1}], "pending_writes": [],
          "pending_tasks": [{"task_id": "t1", "channels": [forged], "interrupted": False,
                             "error": False}]}
    step = {"node": "n", "checkpoint_id": "c0", "intents": [], "before": cp, "after": []}
    thread = {"thread_id": "th", "graph": "g", "version": "1", "checkpoints_in_thread": 1,
              "latest_checkpoint_id": "c1", "steps": [step]}
    report = markdown(_doc(workflow={"threads": [thread]}, observations=[
        {"intent_event_id": "i2", "origin": "replay", "observed": [{}],
         "changed": [f"observation_changed: {forged} abc"]}]))
    outside = re.sub(r"`[^`\n]*`", "", report)
    assert "<img" not in outside and "](http" not in outside


def test_an_effect_at_the_target_of_a_key_the_ledger_failed_disagrees() -> None:
    """The ledger ended the key without an effect (failed, rejected) yet the target holds
    one: the disagreement a review is for, never "nothing to compare". A key still in
    flight or waiting for an operator has nothing to compare yet."""
    for state in ("failed", "rejected"):
        side = target_side(Answering("pay_9"), "acme/refund/a", [], ledger_state=state)
        assert (side["answer"], side["agrees"]) == ("found", False), state
        assert "DISAGREES with the ledger" in markdown(_doc(target_record=side))
    for state in ("in_progress", "needs_reconciliation", None):
        side = target_side(Answering("pay_9"), "acme/refund/a", [], ledger_state=state)
        assert side["agrees"] is None, state
    assert target_side(Answering(None), "k", [], ledger_state="failed")["agrees"] is True


def test_the_evidence_command_gives_the_target_side_the_keys_state(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    doc = {**_doc(state="failed"), "topics": {}}
    monkeypatch.setattr(evidence_cmd, "ask", lambda args, how: dict(doc))
    monkeypatch.setattr(evidence_cmd, "_target", lambda spec, name: Answering("pay_9"))
    out = tmp_path / "e.json"
    args = argparse.Namespace(key="acme/refund/a", wait=0, checkpointer=None, target="t:t",
                              lookup_timeout=1.0, out=str(out), report=None)
    assert evidence_cmd._evidence(args) == 0
    assert json.loads(out.read_text())["target_record"]["agrees"] is False
