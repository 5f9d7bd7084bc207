"""Every labelled series an alert rule watches exists, at 0, from the start of the process
that exports it: a counter first created by its first increment has no earlier sample, and
Prometheus's increase() misses that step (tests/prometheus/alerts_test.yml shows both)."""

from __future__ import annotations

import re
import threading
import uuid
from typing import get_args

import pytest
from prometheus_client import REGISTRY

from ledger_stream.config import Settings
from ledger_stream.connector import metrics as connector_metrics
from ledger_stream.connector.memory import MemoryTarget
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.connector.runtime import ConnectorWorker
from ledger_stream.domain.events import AlertKind, OutcomeStatus
from ledger_stream.processor import metrics
from ledger_stream.processor.exceptions import AbandonKind
from ledger_stream.serde.schemas import SchemaSet
from tests.prometheus.tools import shipped_rules

pytestmark = pytest.mark.timeout(60)

SELECTOR = re.compile(r"(ledger_[a-z_]+)(?:\{([^}]*)\})?\[")  # a range selector: a counter
CREATED = re.compile(r"(ledger_[a-z_]+_created)(?:\{([^}]*)\})?")  # a counter's creation time
MATCHER = re.compile(r'([a-z_]+)(=~|!=|=)"([^"]*)"')


def samples(name: str) -> list[dict[str, str]]:
    """The label sets of every ``name`` sample in the process's registry."""
    return [dict(s.labels) for metric in REGISTRY.collect() for s in metric.samples
            if s.name == name]


def test_alert_kinds_have_one_source_the_avro_enum():
    """start_series creates one series per AlertKind member: the enum must be the schema's."""
    kind = next(f for f in SchemaSet.load().current("Alert").raw["fields"]
                if f["name"] == "kind")
    assert {k.value for k in AlertKind} == set(kind["type"]["symbols"])


def test_the_processor_creates_every_series_its_rules_watch_at_start():
    topics = (f"p{uuid.uuid4().hex[:6]}.intents", f"p{uuid.uuid4().hex[:6]}.attempts")
    metrics.start_series(topics)
    alerts = {s["kind"] for s in samples("ledger_alerts_total")}
    assert {k.value for k in AlertKind} <= alerts
    assert set(topics) <= {s["topic"] for s in samples("ledger_dlq_total")}
    assert set(get_args(AbandonKind)) <= {
        s["reason"] for s in samples("ledger_batches_abandoned_total")}


def test_a_connector_creates_its_targets_outcome_series_when_built():
    name = f"t{uuid.uuid4().hex[:8]}"  # no other test has this target's series
    stop = threading.Event()
    stop.set()
    worker = ConnectorWorker(Settings(), "127.0.0.1:9", MemoryTarget(name=name),
                             ConnectorOptions())
    try:
        outcomes = {s["outcome"] for s in samples("ledger_connector_attempts_total")
                    if s["target"] == name}
        assert outcomes == {o.value for o in OutcomeStatus}
    finally:
        worker.run(stop)  # stopped before it reaches Kafka: closes its clients


def test_every_counter_a_rule_watches_has_its_series_at_start():
    """Whatever a rule's range selector names (metric and label values), a started process
    exports it before anything happened; a new rule on an uncreated series fails here."""
    metrics.start_series(("ledger.intents", "ledger.attempts"))
    connector_metrics.start_series("payments")
    for rule in shipped_rules():
        expr = str(rule["expr"])
        for metric, matchers in SELECTOR.findall(expr) + CREATED.findall(expr):
            found = samples(metric)
            assert found, f"{rule['alert']}: no {metric} series at start"
            for label, op, value in MATCHER.findall(matchers):
                if op == "!=":
                    continue
                for wanted in value.split("|") if op == "=~" else [value]:
                    assert any(s.get(label) == wanted for s in found), \
                        f"{rule['alert']}: no {metric}{{{label}=\"{wanted}\"}} at start"
