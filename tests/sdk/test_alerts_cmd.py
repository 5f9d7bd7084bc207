"""``ledger-stream alerts``: the alerts already raised, filtered by kind and tenant, as a table
or JSON; ``--follow`` then prints each new alert as it lands and stops cleanly on SIGTERM; a
record that is not an alert is reported and skipped, never fatal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Producer

from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(90)


def alert(tenant: str, kind: ev.AlertKind) -> ev.Alert:
    return ev.Alert(alert_id=uuid.uuid4().hex, key=f"{tenant}/refund/{uuid.uuid4().hex[:8]}",
                    kind=kind, source_event_id=uuid.uuid4().hex, detail="key holds args h1",
                    at_ms=1_796_000_000_250)


def send(settings: Settings, *alerts: ev.Alert) -> None:
    producer = EventProducer(settings, settings.kafka_bootstrap, AvroCodec())
    for a in alerts:
        producer.send("alerts", a)
    producer.flush()


def common(s: Settings) -> list[str]:
    assert s.kafka_bootstrap
    return ["--bootstrap", s.kafka_bootstrap, "--topic-prefix", s.topic_prefix]


def test_alerts_filtered_by_kind_and_tenant_as_table_and_json(
        ledger_topics: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    conflict = alert("acme", ev.AlertKind.CONFLICTING_ARGUMENTS)
    duplicate = alert("acme", ev.AlertKind.DUPLICATE_EFFECT)
    other = alert("globex", ev.AlertKind.CONFLICTING_ARGUMENTS)
    send(ledger_topics, conflict, duplicate, other)
    raw = Producer({"bootstrap.servers": ledger_topics.kafka_bootstrap})
    raw.produce(ledger_topics.topic("alerts"), b"not avro", key=b"acme/refund/x")
    raw.flush()

    assert main(["alerts", *common(ledger_topics)]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].split("\t")[:3] == ["at", "kind", "key"]
    assert sorted(line.split("\t")[2] for line in lines[1:]) == sorted(
        a.key for a in (conflict, duplicate, other))
    assert lines[1].split("\t")[0] == "2026-11-30T00:53:20.250Z"
    assert "skipped" in out.err and "3 alert(s)" in out.err

    assert main(["alerts", "--json", "--kind", "conflicting_arguments", "--tenant", "acme",
                 *common(ledger_topics)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["alert_id"], r["kind"]) for r in rows] == [
        (conflict.alert_id, "conflicting_arguments")]
    assert isinstance(rows[0]["partition"], int) and isinstance(rows[0]["offset"], int)


def test_alerts_print_in_time_order_across_and_within_partitions(
        ledger_topics: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    """Sent newest first, on one key (one partition) and on others (other partitions)."""
    same_key = f"acme/refund/{uuid.uuid4().hex[:8]}"
    sent = []
    for i in range(8):
        a = alert("acme", ev.AlertKind.STALLED)
        key = same_key if i % 2 else a.key
        sent.append(ev.Alert(a.alert_id, key, a.kind, a.source_event_id, a.detail,
                             1_796_000_000_000 - 1_000 * i))
    send(ledger_topics, *sent)
    assert main(["alerts", "--json", *common(ledger_topics)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["alert_id"] for r in rows] == [a.alert_id for a in reversed(sent)]


def test_follow_prints_new_alerts_then_stops_on_sigterm(ledger_topics: Settings) -> None:
    first, second = alert("acme", ev.AlertKind.STALLED), alert("acme", ev.AlertKind.STALLED)
    send(ledger_topics, first)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger_stream.cli.main", "alerts", "--follow", "--json",
         *common(ledger_topics)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["alert_id"] == first.alert_id
        time.sleep(1.0)  # the follower is past the end of the topic now
        send(ledger_topics, second)
        assert json.loads(proc.stdout.readline())["alert_id"] == second.alert_id
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert "2 alert(s)" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_bad_tenant_or_kind_says_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alerts", "--tenant", "a/b"]) == 2
    assert "--tenant 'a/b'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["alerts", "--kind", "nope"])
    assert exc.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
