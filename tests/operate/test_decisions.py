"""Operator decisions are guarded (``reconcile resolve`` and the gateway share the rules):
refused unless the key waits for an operator at the attempt the operator names; the same
decision again is a no-op and produces nothing; the same decision id with other contents is
refused. On the real broker, reading what was recorded back from the attempts topic."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger_lab.harness.operator import latest_receipt, waiting_for_operator
from ledger_lab.harness.processes import start_processor
from ledger_lab.harness.view import ServedView
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import key_records
from ledger_stream.operate import Actor, Decided, DecisionRefused, record_decision
from ledger_stream.operate import decisions as decisions_module
from ledger_stream.sdk.errors import StaleTimelineError
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(90)


def waiting_at(s: Settings, key: str, attempt: int) -> None:
    producer = EventProducer(s, s.kafka_bootstrap)
    producer.send("receipts", ev.Receipt(
        uuid.uuid4().hex, key, "i1", ev.ReceiptStatus.NEEDS_RECONCILIATION, ev.Reason.NONE,
        "h" * 64, attempt, 1_796_000_000_000, key_status=ev.ReceiptStatus.NEEDS_RECONCILIATION))
    producer.flush()


def audited(s: Settings, key: str) -> list[ev.AuditRecord]:
    assert s.kafka_bootstrap
    codec = AvroCodec()
    return [codec.decode(r.value, (ev.AuditRecord,))
            for r in key_records(s.kafka_bootstrap, s.topic("audit"), key)]


def decisions(s: Settings, key: str) -> list[ev.OperatorResolution]:
    assert s.kafka_bootstrap
    codec = AvroCodec()
    return [e for r in key_records(s.kafka_bootstrap, s.topic("attempts"), key)
            if isinstance(e := codec.decode(r.value), ev.OperatorResolution)]


def resolve(s: Settings, key: str, *extra: str) -> int:
    assert s.kafka_bootstrap
    # No processor here: nothing will apply the decision, so none is waited for.
    return main(["reconcile", "resolve", key, "--operator", "ops-ann", "--wait", "0", *extra,
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


def test_an_external_id_too_long_or_holding_a_card_number_is_refused_before_the_audit(
        ledger_topics: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    s, key = ledger_topics, f"acme/refund/{uuid.uuid4().hex[:8]}"
    waiting_at(s, key, 1)
    assert resolve(s, key, "--applied", "4111 1111 1111 1111", "--attempt", "1",
                   "--reason", "paid by hand") == 2
    err = capsys.readouterr().err
    assert "the external id holds what looks like a card number" in err and "4111" not in err
    assert resolve(s, key, "--applied", "x" * 257, "--attempt", "1",
                   "--reason", "paid by hand") == 2
    assert "the external id is at most 256 characters, got 257" in capsys.readouterr().err
    assert audited(s, key) == [] and decisions(s, key) == []
    assert resolve(s, key, "--applied", "x" * 256, "--attempt", "1",
                   "--reason", "paid by hand") == 0
    assert [d.external_id for d in decisions(s, key)] == ["x" * 256]


def test_a_decision_larger_than_kafka_takes_is_refused_and_nothing_is_audited(
        ledger_topics: Settings) -> None:
    # The audit record comes before the decision (never an unaudited decision), so a
    # decision Kafka would refuse must be refused before it: else the audit trail shows a
    # decision that was never sent.
    s, key = ledger_topics, f"acme/refund/{uuid.uuid4().hex[:8]}"
    assert s.kafka_bootstrap
    waiting_at(s, key, 1)
    with pytest.raises(DecisionRefused, match="more than Kafka takes in a record"):
        record_decision(s, s.kafka_bootstrap, AvroCodec(), key=key, attempt=1,
                        resolution=ev.Resolution.FAILED, actor=Actor.from_cli("ops-ann"),
                        reason="r" * 1_100_000, decision_id="d-big", wait_s=0)
    assert audited(s, key) == [] and decisions(s, key) == []


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

    assert main(["reconcile", "list", "--json", "--bootstrap", s.kafka_bootstrap,
                 "--topic-prefix", s.topic_prefix]) == 0
    out = capsys.readouterr()
    rows = [json.loads(line) for line in out.out.splitlines()]
    assert [(r["key"], r["attempt"]) for r in rows] == [(waiting, 3)]
    assert isinstance(rows[0]["since_ms"], int) and rows[0]["since"].endswith("Z")
    assert "1 key(s) waiting for an operator" in out.err


def test_racing_decisions_one_takes_effect_and_the_other_is_told(
        ledger_topics: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two operators decide the same waiting key at once, both past the check before either
    sends: the processor applies the first to arrive, and its sender hears "applied"; the
    other hears which decision took effect instead of an accepted-looking answer. Retried,
    the winner is a no-op that still says applied."""
    s, key = ledger_topics, f"acme/email/{uuid.uuid4().hex[:8]}"
    assert s.kafka_bootstrap
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log")
    try:
        assert waiting_for_operator(s, key).attempts == 1
        both_checked = threading.Barrier(2, timeout=30)
        check = decisions_module._receipts

        def check_then_meet(*args: Any) -> Any:
            found = check(*args)
            both_checked.wait()
            return found

        monkeypatch.setattr(decisions_module, "_receipts", check_then_meet)
        answers: dict[str, Any] = {}

        def decide(decision_id: str, resolution: ev.Resolution) -> None:
            try:
                answers[decision_id] = record_decision(
                    s, s.kafka_bootstrap or "", AvroCodec(), key=key, attempt=1,
                    resolution=resolution, actor=Actor.from_cli(f"ops-{decision_id}"),
                    reason="checked", decision_id=decision_id, external_id="mail-1", wait_s=30)
            except DecisionRefused as exc:
                answers[decision_id] = exc

        threads = [threading.Thread(target=decide, args=("d-failed", ev.Resolution.FAILED)),
                   threading.Thread(target=decide, args=("d-applied", ev.Resolution.APPLIED))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        monkeypatch.undo()
        final = latest_receipt(s, key, {ev.ReceiptStatus.SUCCEEDED, ev.ReceiptStatus.FAILED})
        # Ground truth: the state the processor settled the key in.
        winner = "d-applied" if final.key_status is ev.ReceiptStatus.SUCCEEDED else "d-failed"
        loser = ({"d-applied", "d-failed"} - {winner}).pop()
        won = answers[winner]
        assert isinstance(won, Decided) and (won.verdict, won.replayed) == ("applied", False)
        assert won.receipt == final
        lost = answers[loser]
        assert isinstance(lost, DecisionRefused), lost
        assert f"decision {winner} took effect first" in str(lost)
        assert {d.event_id for d in decisions(s, key)} == {"d-applied", "d-failed"}

        again = record_decision(
            s, s.kafka_bootstrap, AvroCodec(), key=key, attempt=1,
            resolution=won.decision.resolution, actor=Actor.from_cli(f"ops-{winner}"),
            reason="checked", decision_id=winner, external_id="mail-1", wait_s=5)
        assert (again.verdict, again.replayed, again.receipt) == ("applied", True, final)
    finally:
        assert proc.stop() == 0, proc.tail()


def test_a_decision_id_the_receipt_could_not_name_is_refused(ledger_topics: Settings,
                                                            capsys: pytest.CaptureFixture[str],
                                                            ) -> None:
    s, key = ledger_topics, f"acme/email/{uuid.uuid4().hex[:8]}"
    waiting_at(s, key, 1)
    assert resolve(s, key, "--failed", "--attempt", "1", "--reason", "x",
                   "--decision-id", "d 1]") == 2
    assert "a decision id is 1 to 128 letters" in capsys.readouterr().err
    assert decisions(s, key) == []


def test_a_decision_id_is_one_decision_on_any_key_with_or_without_a_view(
        ledger_topics: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = ledger_topics
    first, second = (f"acme/email/{uuid.uuid4().hex[:8]}" for _ in range(2))
    for key in (first, second):
        waiting_at(s, key, 1)
    used = f"d-{uuid.uuid4().hex[:8]}"
    decision = ["--failed", "--attempt", "1", "--reason", "bounced", "--decision-id", used]
    assert resolve(s, first, *decision) == 0
    capsys.readouterr()
    # Without a view: the attempts topic is read.
    assert resolve(s, second, *decision) == 2
    assert f"recorded with other contents (failed of attempt 1 of {first}" in \
        capsys.readouterr().err
    assert decisions(s, second) == []

    # With a view: its decision index answers, as of every decision committed now.
    view = ServedView(s, tmp_path / "view")
    try:
        assert resolve(s, second, *decision, "--view-url", view.url) == 2
        assert f"of {first}" in capsys.readouterr().err
        assert resolve(s, second, "--failed", "--attempt", "1", "--reason", "bounced",
                       "--decision-id", f"{used}-2", "--view-url", view.url) == 0
        assert [d.event_id for d in decisions(s, second)] == [f"{used}-2"]
    finally:
        view.close()
    # Ids are a tenant's: another tenant's decision under the same id is its own.
    theirs = f"globex/email/{uuid.uuid4().hex[:8]}"
    waiting_at(s, theirs, 1)
    assert resolve(s, theirs, *decision) == 0
    assert first not in capsys.readouterr().err
    bare = ServedView(s, tmp_path / "bare", timeline=False)
    try:  # a view of latest receipts only: the attempts topic answers instead
        assert resolve(s, second, *decision, "--view-url", bare.url) == 2
        assert f"of {first}" in capsys.readouterr().err
    finally:
        bare.close()


def test_a_decision_id_a_view_cannot_check_is_not_used(
        ledger_topics: Settings, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The view is behind (or away): the id may be in use, so the decision is not sent."""
    s, key = ledger_topics, f"acme/email/{uuid.uuid4().hex[:8]}"
    waiting_at(s, key, 1)

    def behind(*_: Any, **__: Any) -> None:
        raise StaleTimelineError("decision d-9", {})

    monkeypatch.setattr(decisions_module.ViewClient, "decision", behind)
    assert resolve(s, key, "--failed", "--attempt", "1", "--reason", "bounced",
                   "--decision-id", "d-9", "--view-url", "http://127.0.0.1:9") == 2
    assert "cannot check that decision id d-9 is unused" in capsys.readouterr().err
    assert decisions(s, key) == []


def test_a_key_that_moves_on_another_way_refuses_the_decision_whatever_its_detail_says(
        ledger_topics: Settings) -> None:
    """After the check, the key fails on a late outcome from its holder whose error quotes
    a decision mark (a target's text can say anything). Only the processor's operator
    receipts name decisions: the sender hears the key moved on, not "applied"."""
    s, key = ledger_topics, f"acme/email/{uuid.uuid4().hex[:8]}"
    assert s.kafka_bootstrap
    waiting_at(s, key, 1)
    checked = key_records(s.kafka_bootstrap, s.topic("receipts"), key)[-1].offset
    producer = EventProducer(s, s.kafka_bootstrap)
    producer.send("receipts", ev.Receipt(
        uuid.uuid4().hex, key, "i1", ev.ReceiptStatus.FAILED, ev.Reason.TARGET_REJECTED,
        "h" * 64, 1, 1_796_000_000_100, detail="HTTP 400: see [decision d-mine]",
        key_status=ev.ReceiptStatus.FAILED))
    producer.flush()
    mine = ev.OperatorResolution("d-mine", key, 1, ev.Resolution.APPLIED, "ops-ann", 1,
                                 "mail-1", "checked")
    with pytest.raises(DecisionRefused, match="moved on before decision d-mine applied"):
        decisions_module._settled(Decided(mine, False), s, s.kafka_bootstrap, AvroCodec(),
                                  checked, 5.0)
