"""Live scrapes: a real Prometheus with the shipped rules scrapes a real processor on the
real broker, and the first duplicate effect after the processor's start raises
LedgerDuplicateEffect. Before the processor created its alert series at 0, the series first
appeared at 1 and the rule's increase() never fired."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.reader import read_topic
from tests.factories import claim, intent, outcome
from tests.processor.support import receipts_for, served_metrics_port, wait_for
from tests.prometheus.server import PrometheusServer
from tests.prometheus.tools import binary

pytestmark = pytest.mark.timeout(180)

ALERT = "LedgerDuplicateEffect"


def test_the_first_duplicate_effect_after_a_start_fires_the_shipped_rule(
        ledger_topics: Settings, tmp_path: Path):
    s = ledger_topics
    binary("prometheus")  # missing: fail at once, naming the package to install
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log", metrics_port=0)
    prometheus: PrometheusServer | None = None
    try:
        port = served_metrics_port(proc)
        prometheus = PrometheusServer(tmp_path / "prometheus",
                                      {"ledger-processor": [f"127.0.0.1:{port}"]})
        prometheus.ready()
        key = f"acme/refund/{uuid.uuid4().hex[:8]}"
        first = intent(key=key)
        producer = EventProducer(s, s.kafka_bootstrap)
        producer.send("intents", first)
        producer.flush()
        receipts_for(s, {first.event_id}, proc=proc)
        # Prometheus holds a sample taken after the intent was decided, before the effect.
        wait_for("a scrape of the running processor", lambda: bool(prometheus.query(
            'ledger_decisions_total{job="ledger-processor",event="Intent"} > 0')), 30, [proc])
        assert not prometheus.alerts(ALERT)
        # The processor exported the series at 0 from its start (start_series): Prometheus
        # holds it before anything was counted.
        assert prometheus.query('ledger_alerts_total{job="ledger-processor",'
                                'kind="duplicate_effect"} == 0')

        for event in (claim(1, "c1", key=key),
                      outcome(ev.OutcomeStatus.SUCCEEDED, 1, "c1", key=key,
                              external_id="pay-1"),
                      outcome(ev.OutcomeStatus.SUCCEEDED, 1, "zombie", key=key,
                              external_id="pay-2")):
            producer.send("attempts", event)
        producer.flush()
        sent = time.time()
        alerts = read_topic(s.kafka_bootstrap, s.topic("alerts"), timeout_s=60,
                            until=lambda found: any(a.key == key for a in found))
        assert [a.kind for a in alerts if a.key == key] == [ev.AlertKind.DUPLICATE_EFFECT]

        def firing() -> bool:
            assert prometheus is not None
            return any(a["state"] == "firing" and a["labels"].get("kind") == "duplicate_effect"
                       for a in prometheus.alerts(ALERT))

        try:
            wait_for(f"{ALERT} to fire in Prometheus", firing, 20)
        except AssertionError:
            series = prometheus.api("query_range", start=f"{sent - 30:.3f}",
                                    end=f"{time.time():.3f}", step="1",
                                    query='ledger_alerts_total{kind="duplicate_effect"}')
            raise AssertionError(f"{ALERT} did not fire; the series Prometheus holds: "
                                 f"{series['result']}\n{prometheus.tail(8)}") from None
    finally:
        if prometheus is not None:
            assert prometheus.stop() == 0, prometheus.tail()
        assert proc.stop() == 0, proc.tail()


def test_a_duplicate_decided_before_the_first_scrape_fires_the_shipped_rule(
        ledger_topics: Settings, tmp_path: Path):
    """A processor that starts on a backlog can count the first duplicate before Prometheus
    first scrapes it: the series Prometheus holds then starts at 1, and increase() alone
    never fires. The rules also fire on a count above 0 in a series created (the
    counter's ``_created`` sample) within the rule's window."""
    s = ledger_topics
    binary("prometheus")
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log", metrics_port=0)
    prometheus: PrometheusServer | None = None
    try:
        port = served_metrics_port(proc)
        key = f"acme/refund/{uuid.uuid4().hex[:8]}"
        first = intent(key=key)
        producer = EventProducer(s, s.kafka_bootstrap)
        producer.send("intents", first)
        producer.flush()
        receipts_for(s, {first.event_id}, proc=proc)
        for event in (claim(1, "c1", key=key),
                      outcome(ev.OutcomeStatus.SUCCEEDED, 1, "c1", key=key,
                              external_id="pay-1"),
                      outcome(ev.OutcomeStatus.SUCCEEDED, 1, "zombie", key=key,
                              external_id="pay-2")):
            producer.send("attempts", event)
        producer.flush()
        alerts = read_topic(s.kafka_bootstrap, s.topic("alerts"), timeout_s=60,
                            until=lambda found: any(a.key == key for a in found))
        assert [a.kind for a in alerts if a.key == key] == [ev.AlertKind.DUPLICATE_EFFECT]

        prometheus = PrometheusServer(tmp_path / "prometheus",
                                      {"ledger-processor": [f"127.0.0.1:{port}"]})
        prometheus.ready()
        wait_for("a scrape holding the duplicate", lambda: bool(prometheus.query(
            'ledger_alerts_total{job="ledger-processor",kind="duplicate_effect"} == 1')),
            30, [proc])

        def firing() -> bool:
            assert prometheus is not None
            return any(a["state"] == "firing" and a["labels"].get("kind") == "duplicate_effect"
                       for a in prometheus.alerts(ALERT))

        wait_for(f"{ALERT} to fire in Prometheus", firing, 20)
    finally:
        if prometheus is not None:
            assert prometheus.stop() == 0, prometheus.tail()
        assert proc.stop() == 0, proc.tail()
