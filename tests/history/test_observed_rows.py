"""What the timeline and the evidence show of observations (pure: records built in memory):
each intent's observations as source, model, digest and size; the re-run that read
something else flagged on its row and in the evidence's ``observations`` section; the
rows of other events untouched."""

from __future__ import annotations

import json

from ledger_stream.domain import events as ev
from ledger_stream.domain.observations import observe
from ledger_stream.history import Located, timeline
from ledger_stream.history.evidence import evidence
from tests.factories import KEY, intent

ANSWER = {"content": "refund inv-9, 12.50 EUR", "tool_calls": [{"name": "issue_refund"}]}


def _intent(answer: object, origin: ev.Origin) -> ev.Intent:
    return intent(origin=origin, workflow=ev.Workflow("agent", "1.0", "t-1", "tools", "cp"),
                  observations=(observe("model", answer, model="fake-1", trace_id="tr-1"),))


def _records(*intents: ev.Intent) -> list[Located]:
    found = [Located("intents", "ledger.intents", 0, n, 1_000 + n, i)
             for n, i in enumerate(intents)]
    receipt = ev.Receipt("r", KEY, intents[0].event_id, ev.ReceiptStatus.SUCCEEDED,
                         ev.Reason.NONE, intents[0].args_hash, 1, 1_000, external_id="pay-1")
    return [*found, Located("receipts", "ledger.receipts", 0, 0, 1_000, receipt)]


def test_the_replay_that_read_another_answer_is_flagged_on_its_intent_row() -> None:
    first = _intent(ANSWER, ev.Origin.FRESH)
    same = _intent(dict(ANSWER), ev.Origin.REPLAY)
    other = _intent({**ANSWER, "content": "refund inv-9 please"}, ev.Origin.REPLAY)
    rows = {r.intent_event_id: r for r in timeline(_records(first, same, other))
            if r.role == "intents"}
    assert rows[first.event_id].flag is None and rows[same.event_id].flag is None
    flag = rows[other.event_id].flag or ""
    assert flag.startswith("observation_changed: model") and first.event_id in flag
    shown = rows[first.event_id].observed or ""
    assert shown.startswith("model fake-1 ") and shown.endswith(
        f"({first.observations[0].size} B)")
    receipt = next(r for r in timeline(_records(first, other)) if r.role == "receipts")
    assert receipt.flag is None and receipt.observed is None


def test_the_evidence_lists_each_intents_observations_and_the_change() -> None:
    first = _intent(ANSWER, ev.Origin.FRESH)
    other = _intent({**ANSWER, "content": "refund inv-9 please"}, ev.Origin.REPLAY)
    found = evidence(KEY, _records(first, other), 5_000)
    section = found["observations"]
    assert [s["intent_event_id"] for s in section] == [first.event_id, other.event_id]
    assert section[0]["changed"] == [] and section[1]["changed"][0].startswith(
        "observation_changed: model")
    assert section[1]["observed"][0]["digest"] == other.observations[0].digest
    assert section[1]["origin"] == "replay"
    assert "refund inv-9" not in json.dumps(found)  # digests only, never the answer
