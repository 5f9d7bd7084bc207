"""deploy/prometheus/ and deploy/grafana/: the alerting rules, the scrape config and the
dashboard that docker-compose.yml loads. Every alert kind the processor raises has a rule,
every metric a rule or a panel queries is one the code exports, and compose mounts the files
where Prometheus and Grafana read them. The rules themselves run on the real engine in
tests/prometheus/ (promtool and a live server)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY

import ledger_stream.connector.metrics
import ledger_stream.processor.metrics
import ledger_stream.view.follower
import ledger_stream.view.server  # noqa: F401  (registers the view's metrics)
from ledger_stream.domain.events import AlertKind

pytestmark = pytest.mark.timeout(60)

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
RULES = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "ledger-stream.json"
METRIC = re.compile(r"\bledger_[a-z_]+")


def exported() -> set[str]:
    """Every series name the project's collectors expose (counters as ``_total``,
    histograms with ``_bucket``/``_sum``/``_count``)."""
    names: set[str] = set()
    for collector in list(REGISTRY._collector_to_names):  # noqa: SLF001
        names |= set(REGISTRY._collector_to_names[collector])  # noqa: SLF001
    return {n for n in names if n.startswith("ledger_")}


def rules() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_every_rule_is_complete_and_queries_exported_metrics():
    known = exported()
    found = rules()
    assert found
    for rule in found:
        assert re.fullmatch(r"Ledger[A-Za-z]+", str(rule["alert"])), rule
        assert rule["labels"]["severity"] in ("critical", "warning"), rule  # type: ignore[index]
        assert rule["annotations"]["summary"] and rule["annotations"]["action"], rule  # type: ignore[index]
        metrics = set(METRIC.findall(str(rule["expr"])))
        assert metrics or "up{" in str(rule["expr"]), rule
        assert metrics <= known, f"{rule['alert']} queries {metrics - known}, not exported"


def test_every_alert_kind_has_a_rule():
    kinds = {m for rule in rules() for m in re.findall(r'kind="([a-z_]+)"', str(rule["expr"]))}
    assert {k.value for k in AlertKind} <= kinds


def test_the_dashboard_queries_exported_metrics_through_the_provisioned_source():
    dashboard = json.loads(DASHBOARD.read_text())
    source = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    uid = source["datasources"][0]["uid"]
    known = exported()
    assert dashboard["panels"]
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == uid, panel["title"]
            metrics = set(METRIC.findall(target["expr"]))
            assert metrics and metrics <= known, (panel["title"], metrics - known)


def test_compose_scrapes_every_metrics_port_and_mounts_the_files():
    compose = yaml.safe_load((DEPLOY.parent / "docker-compose.yml").read_text())
    services = compose["services"]
    scrape = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = {t for job in scrape["scrape_configs"] for c in job["static_configs"]
               for t in c["targets"]}
    assert targets == {"processor:9464", "connector-payments:9465", "view:8077"}
    assert services["processor"]["environment"]["LEDGER_METRICS_PORT"] == "9464"
    assert services["connector-payments"]["environment"]["LEDGER_CONNECTOR_METRICS_PORT"] \
        == "9465"
    assert scrape["rule_files"] == ["/etc/prometheus/alerts.yml"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in services["prometheus"]["volumes"]}
    assert mounts["/etc/prometheus/alerts.yml"] == "./deploy/prometheus/alerts.yml"
    assert mounts["/etc/prometheus/prometheus.yml"] == "./deploy/prometheus/prometheus.yml"
    grafana = {v.split(":")[1]: v.split(":")[0] for v in services["grafana"]["volumes"]}
    provider = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "dashboards" / "ledger.yml").read_text())
    assert grafana[provider["providers"][0]["options"]["path"]] == "./deploy/grafana/dashboards"
    assert grafana["/etc/grafana/provisioning"] == "./deploy/grafana/provisioning"
