"""Operator identity at the gateway, on a real broker: the operator routes take who acts from
the API key (``TENANT:operator:NAME=KEY``), write an audit record naming that operator and
the key's id before the command, and refuse agents' keys and keys naming no holder. The
key's timeline shows the audit records."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import key_records
from ledger_stream.serde import AvroCodec
from tests.gateway.support import ACME, ACME_AGENT, ACME_UNNAMED, GLOBEX, curl, intent

pytestmark = pytest.mark.timeout(180)
ACME_ID = "key:" + hashlib.sha256(ACME.encode()).hexdigest()[:12]


def audited(s: Settings, key: str) -> list[ev.AuditRecord]:
    assert s.kafka_bootstrap
    codec = AvroCodec()
    return [codec.decode(r.value, (ev.AuditRecord,))
            for r in key_records(s.kafka_bootstrap, s.topic("audit"), key)]


def waiting_at(s: Settings, key: str, attempt: int) -> None:
    producer = EventProducer(s, s.kafka_bootstrap)
    producer.send("receipts", ev.Receipt(
        uuid.uuid4().hex, key, "i1", ev.ReceiptStatus.NEEDS_RECONCILIATION, ev.Reason.NONE,
        "h" * 64, attempt, 1_796_000_000_000, key_status=ev.ReceiptStatus.NEEDS_RECONCILIATION))
    producer.flush()


def test_a_decision_is_audited_as_the_keys_operator_and_shown_in_the_timeline(
        bare_gateway: str, ledger_topics: Settings) -> None:
    gateway, s = bare_gateway, ledger_topics
    key = f"acme/refund/{uuid.uuid4().hex[:8]}"
    waiting_at(s, key, 1)
    decision = {"resolution": "not_applied", "attempt": 1, "reason": "target says no",
                "decision_id": f"d-{uuid.uuid4().hex[:8]}"}
    # Agents' keys, and a key that names no holder, never reach the route: nothing audited.
    for agent in (ACME_AGENT, ACME_UNNAMED):
        code, answer = curl("POST", f"{gateway}/v1/reconciliation/{key}?wait=0", agent,
                            decision)
        assert code == 403 and "TENANT:operator:NAME=KEY" in answer["detail"], answer
    # A body naming its own operator is refused, not taken at its word.
    code, answer = curl("POST", f"{gateway}/v1/reconciliation/{key}?wait=0", ACME,
                        {**decision, "operator": "mallory"})
    assert code == 422 and "holder of the API key" in str(answer)
    assert audited(s, key) == []

    code, answer = curl("POST", f"{gateway}/v1/reconciliation/{key}?wait=0", ACME, decision)
    assert code == 202 and answer["operator"] == "ops-ann", answer
    (record,) = audited(s, key)
    assert (record.who, record.role, record.credential, record.action, record.key,
            record.command_id, record.detail) == (
        "ops-ann", "operator", ACME_ID, ev.AuditAction.DECISION, key,
        decision["decision_id"], "not_applied of attempt 1")
    assert ACME not in repr(record)  # the key's id, never the key

    code, rows = curl("GET", f"{gateway}/v1/timeline/{key}", ACME)
    assert code == 200
    (row,) = [r for r in rows if r["role"] == "audit"]
    assert (row["event"], row["outcome"]) == ("AuditRecord", "audit decision")
    assert row["detail"].startswith(f"by ops-ann (operator, {ACME_ID})")


def test_freezes_and_unfreezes_are_audited_as_the_keys_operator(
        bare_gateway: str, ledger_topics: Settings, tmp_path: Path) -> None:
    gateway, s = bare_gateway, ledger_topics
    # The key given as acme=KEY was named at startup: it is an agent's now.
    warning = (tmp_path / "api.log").read_text()
    assert "API keys given as TENANT=KEY name no holder" in warning
    assert f"{tmp_path / 'keys'}:5" in warning  # where it was given (the file's line)
    assert ACME_UNNAMED not in warning  # never the key
    for agent in (ACME_AGENT, ACME_UNNAMED):
        assert curl("POST", f"{gateway}/v1/freezes?wait=0", agent,
                    {"action": "refund", "reason": "INC-7"})[0] == 403
        assert curl("DELETE", f"{gateway}/v1/freezes/refund?wait=0", agent)[0] == 403
    code, answer = curl("DELETE", f"{gateway}/v1/freezes/refund?wait=0&operator=mallory",
                        ACME)
    assert code == 400 and "holder of the API key" in answer["detail"]
    assert audited(s, "~freeze/acme/refund") == []

    code, frozen = curl("POST", f"{gateway}/v1/freezes?wait=0", ACME,
                        {"action": "refund", "reason": "INC-7", "mode": "approval"})
    assert code == 201 and frozen["operator"] == "ops-ann", frozen
    code, gone = curl("DELETE", f"{gateway}/v1/freezes/refund?wait=0", ACME)
    assert code == 200 and gone["operator"] == "ops-ann", gone
    assert curl("POST", f"{gateway}/v1/freezes?wait=0", GLOBEX,
                {"action": "refund", "reason": "INC-8"})[0] == 201
    assert [(r.who, r.role, r.credential, r.action, r.command_id, r.detail)
            for r in audited(s, "~freeze/acme/refund")] == [
        ("ops-ann", "operator", ACME_ID, ev.AuditAction.FREEZE, frozen["event_id"],
         "mode approval"),
        ("ops-ann", "operator", ACME_ID, ev.AuditAction.UNFREEZE, gone["event_id"], "")]
    (theirs,) = audited(s, "~freeze/globex/refund")
    assert (theirs.who, theirs.action) == ("ops-eve", ev.AuditAction.FREEZE)

    # An acme refund's timeline shows acme's freeze and unfreeze, never globex's; a key the
    # ledger never saw still has no timeline.
    key = f"acme/refund/{uuid.uuid4().hex[:8]}"
    assert curl("GET", f"{gateway}/v1/timeline/{key}", ACME)[0] == 404
    assert curl("POST", f"{gateway}/v1/intents", ACME, intent(key, wait=0))[0] == 202
    code, rows = curl("GET", f"{gateway}/v1/timeline/{key}", ACME)
    assert code == 200, rows
    assert [r["outcome"] for r in rows if r["role"] == "audit"] == [
        "audit freeze", "audit unfreeze"]
