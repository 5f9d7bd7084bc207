"""The audit topic on a real broker: every operator decision, freeze and unfreeze of the CLI
writes a record naming the operator and the host before the command; the key's timeline
(``inspect``, from the topics and from the view) shows it; a command whose audit record
cannot be written is not sent."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from ledger_lab.harness.view import ServedView
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import key_records
from ledger_stream.kafka.topics import create_topics
from ledger_stream.operate import Actor, audit
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(120)


def audited(s: Settings, key: str) -> list[ev.AuditRecord]:
    """The audit records under ``key``, in log order."""
    assert s.kafka_bootstrap
    codec = AvroCodec()
    return [codec.decode(r.value, (ev.AuditRecord,))
            for r in key_records(s.kafka_bootstrap, s.topic("audit"), key)]


def decisions(s: Settings, key: str) -> list[ev.OperatorResolution]:
    assert s.kafka_bootstrap
    codec = AvroCodec()
    return [e for r in key_records(s.kafka_bootstrap, s.topic("attempts"), key)
            if isinstance(e := codec.decode(r.value), ev.OperatorResolution)]


def waiting_at(s: Settings, key: str, attempt: int) -> None:
    producer = EventProducer(s, s.kafka_bootstrap)
    producer.send("receipts", ev.Receipt(
        uuid.uuid4().hex, key, "i1", ev.ReceiptStatus.NEEDS_RECONCILIATION, ev.Reason.NONE,
        "h" * 64, attempt, 1_796_000_000_000, key_status=ev.ReceiptStatus.NEEDS_RECONCILIATION))
    producer.flush()


def cli(s: Settings, *argv: str) -> int:
    assert s.kafka_bootstrap
    return main([*argv, "--bootstrap", s.kafka_bootstrap, "--topic-prefix", s.topic_prefix])


def test_cli_decisions_freezes_and_unfreezes_are_audited_and_in_the_keys_timeline(
        ledger_topics: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    s, run = ledger_topics, uuid.uuid4().hex[:8]
    key = f"acme/refund/{run}"
    waiting_at(s, key, 1)
    monkeypatch.setenv("LEDGER_OPERATOR", "ops-env")
    assert cli(s, "reconcile", "resolve", key, "--failed", "--attempt", "1", "--reason",
               "bounced", "--decision-id", f"d-{run}", "--wait", "0") == 0
    # No processor: nothing applies the commands, but each is audited before it is sent.
    assert cli(s, "freeze", "refund", "--tenant", "acme", "--reason", "INC-9", "--operator",
               "ops-ann", "--wait", "0", "--event-id", f"f-{run}") == 0
    assert cli(s, "unfreeze", "refund", "--wait", "0", "--event-id", f"u-{run}") == 0
    capsys.readouterr()

    host = f"host:{socket.gethostname()}"
    (decided,) = audited(s, key)
    assert (decided.who, decided.role, decided.credential, decided.action, decided.command_id,
            decided.detail) == ("ops-env", "cli", host, ev.AuditAction.DECISION, f"d-{run}",
                                "failed of attempt 1")
    assert [d.operator for d in decisions(s, key)] == ["ops-env"]
    (froze,) = audited(s, "~freeze/acme/refund")
    assert (froze.who, froze.action, froze.command_id, froze.detail) == (
        "ops-ann", ev.AuditAction.FREEZE, f"f-{run}", "mode hold")
    (unfroze,) = audited(s, "~freeze/*/refund")  # every tenant's scope
    assert (unfroze.who, unfroze.action, unfroze.command_id) == (
        "ops-env", ev.AuditAction.UNFREEZE, f"u-{run}")

    # A tenant named "~freeze" may own the operation key ~freeze/acme/refund: its decisions'
    # records are not about acme's freezes, and no acme key's timeline shows them.
    assert s.kafka_bootstrap
    audit.record(s, s.kafka_bootstrap, AvroCodec(), Actor("mallory", "operator", "key:0"),
                 ev.AuditAction.DECISION, "~freeze/acme/refund", "d-other")

    def rows(*source: str) -> list[dict[str, object]]:
        assert cli(s, "inspect", key, "--json", *source) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    wanted = [("audit decision", f"by ops-env (cli, {host}) on {key}, command d-{run}: "
               "failed of attempt 1"),
              ("audit freeze", f"by ops-ann (cli, {host}) on ~freeze/acme/refund, command "
               f"f-{run}: mode hold"),
              ("audit unfreeze", f"by ops-env (cli, {host}) on ~freeze/*/refund, command "
               f"u-{run}")]
    scanned = [(r["outcome"], r["detail"]) for r in rows("--scan") if r["role"] == "audit"]
    assert scanned == wanted
    view = ServedView(s, tmp_path / "view")
    try:
        viewed = [(r["outcome"], r["detail"]) for r in rows("--view-url", view.url)
                  if r["role"] == "audit"]
        assert viewed == wanted
    finally:
        view.close()
    assert cli(s, "evidence", key, "--scan") == 0
    document = json.loads(capsys.readouterr().out)
    # Ordered by topic, partition and offset: the freezes' records are in other partitions.
    assert sorted((a["command_id"], a["who"]) for a in document["audit"]) == [
        (f"d-{run}", "ops-env"), (f"f-{run}", "ops-ann"), (f"u-{run}", "ops-env")]


def test_a_command_whose_audit_record_cannot_be_written_is_not_sent(
        ledger_topics: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    s, run = ledger_topics, uuid.uuid4().hex[:8]
    key = f"acme/refund/{run}"
    waiting_at(s, key, 1)
    admin = AdminClient({"bootstrap.servers": s.kafka_bootstrap})
    admin.delete_topics([s.topic("audit")])[s.topic("audit")].result(30)
    try:
        refused_without_audit(s, key, capsys)
    finally:  # the fixture deletes every ledger topic
        assert s.kafka_bootstrap
        create_topics(s.kafka_bootstrap, s)


def refused_without_audit(s: Settings, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(s, "reconcile", "resolve", key, "--failed", "--attempt", "1", "--reason",
               "bounced", "--operator", "ops-ann", "--wait", "0") == 2
    err = capsys.readouterr().err
    assert "audit record of this decision could not be written" in err, err
    assert "was not sent" in err
    assert decisions(s, key) == []
    assert cli(s, "freeze", "refund", "--reason", "INC-9", "--wait", "0") == 2
    assert "freeze not done: the audit record of this freeze could not be written" in \
        capsys.readouterr().err
    assert cli(s, "freezes", "--history", "--json") == 0
    assert capsys.readouterr().out == ""  # no freeze reached the attempts topic
