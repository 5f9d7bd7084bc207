"""Operator decisions are guarded (``reconcile resolve`` and the gateway share the rules):
refused unless the key waits for an operator at the attempt the operator names; the same
decision again is a no-op and produces nothing; the same decision id with other contents is
refused. On the real broker, reading what was recorded back from the attempts topic."""

from __future__ import annotations

import uuid

import pytest

from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import key_records
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(90)


def waiting_at(s: Settings, key: str, attempt: int) -> None:
    producer = EventProducer(s, s.kafka_bootstrap)
    producer.send("receipts", ev.Receipt(
        uuid.uuid4().hex, key, "i1", ev.ReceiptStatus.NEEDS_RECONCILIATION, ev.Reason.NONE,
        "h" * 64, attempt, 1_796_000_000_000, key_status=ev.ReceiptStatus.NEEDS_RECONCILIATION))
    producer.flush()


def decisions(s: Settings, key: str) -> list[ev.OperatorResolution]:
    assert s.kafka_bootstrap
    codec = AvroCodec()
    return [e for r in key_records(s.kafka_bootstrap, s.topic("attempts"), key)
            if isinstance(e := codec.decode(r.value), ev.OperatorResolution)]


def resolve(s: Settings, key: str, *extra: str) -> int:
    assert s.kafka_bootstrap
    return main(["reconcile", "resolve", key, "--operator", "ops-ann", *extra,
                 "--bootstrap", s.kafka_bootstrap, "--topic-prefix", s.topic_prefix])


def test_a_decision_names_the_attempt_and_retrying_it_is_a_no_op(
        ledger_topics: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    s, key = ledger_topics, f"acme/email/{uuid.uuid4().hex[:8]}"
    waiting_at(s, key, 2)
    assert resolve(s, key, "--failed", "--attempt", "1", "--reason", "bounced") == 2
    assert "waits at attempt 2, not 1" in capsys.readouterr().err
    assert decisions(s, key) == []

    decision = ["--failed", "--attempt", "2", "--reason", "bounced", "--decision-id", "d-1"]
    assert resolve(s, key, *decision) == 0
    assert "decision d-1 recorded" in capsys.readouterr().out
    assert resolve(s, key, *decision) == 0  # a script retrying after a timeout
    assert "decision d-1 was already recorded" in capsys.readouterr().out
    (recorded,) = decisions(s, key)
    assert (recorded.event_id, recorded.attempt, recorded.resolution, recorded.operator,
            recorded.note) == ("d-1", 2, ev.Resolution.FAILED, "ops-ann", "bounced")

    assert resolve(s, key, "--not-applied", "--attempt", "2", "--reason", "bounced",
                   "--decision-id", "d-1") == 2
    assert "recorded with other contents" in capsys.readouterr().err
    assert len(decisions(s, key)) == 1


def test_a_key_not_waiting_for_an_operator_and_a_missing_reason_are_refused(
        ledger_topics: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    s, key = ledger_topics, f"acme/email/{uuid.uuid4().hex[:8]}"
    assert resolve(s, key, "--failed", "--attempt", "1", "--reason", "x") == 2
    assert "not waiting for an operator (it is unknown to the ledger)" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit):
        resolve(s, key, "--failed", "--attempt", "1")
    assert "--reason" in capsys.readouterr().err


def test_reconcile_list_shows_the_keys_waiting_and_reports_what_did_not_decode(
        ledger_topics: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import Producer

    s = ledger_topics
    waiting, settled = (f"acme/email/{uuid.uuid4().hex[:8]}" for _ in range(2))
    waiting_at(s, waiting, 3)
    producer = EventProducer(s, s.kafka_bootstrap)
    producer.send("receipts", ev.Receipt(
        uuid.uuid4().hex, settled, "i2", ev.ReceiptStatus.SUCCEEDED, ev.Reason.NONE,
        "h" * 64, 1, 1_796_000_000_000, key_status=ev.ReceiptStatus.SUCCEEDED))
    producer.flush()
    raw = Producer({"bootstrap.servers": s.kafka_bootstrap})
    raw.produce(s.topic("receipts"), b"not avro", key=b"acme/email/x")
    raw.flush()
    assert s.kafka_bootstrap
    assert main(["reconcile", "list", "--bootstrap", s.kafka_bootstrap,
                 "--topic-prefix", s.topic_prefix]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert [line.split("\t")[:2] for line in lines[:-1]] == [[waiting, "attempt 3"]]
    assert lines[-1] == "1 key(s) waiting for an operator"
    assert "1 record(s) of the receipts topic did not decode" in out.err
