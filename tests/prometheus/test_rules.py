"""The shipped alerting rules (deploy/prometheus/alerts.yml) on the real engine: promtool
checks them, and runs the unit tests of alerts_test.yml, where every shipped alert has a
case that fires it from counters that start at 0 (as the processes export them)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.prometheus.tools import RULE_TESTS, RULES, binary, shipped_rules

pytestmark = pytest.mark.timeout(60)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("promtool"), *args], capture_output=True, text=True,
                          timeout=45, check=False)


def test_promtool_checks_the_shipped_rules():
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_shipped_rules_pass_their_promtool_unit_tests():
    done = promtool("test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_shipped_alert_fires_in_a_case_whose_counters_start_as_exported():
    """A rule added without a case fails here; so does a case that fires a counter rule
    from a series that appears above 0 without its ``_created`` sample (a process exports
    both from its start: 0, or the count it reached before the first scrape)."""
    doc = yaml.safe_load(RULE_TESTS.read_text())
    assert doc["rule_files"] == ["../../deploy/prometheus/alerts.yml"]  # the shipped file
    fired: set[str] = set()
    for case in doc["tests"]:
        names = {c["alertname"] for c in case["alert_rule_test"] if c.get("exp_alerts")}
        fired |= names
        given = {s["series"] for s in case["input_series"]}
        counters = [s for s in case["input_series"]
                    if s["series"].split("{")[0].endswith("_total")]
        for series in counters if names else ():
            created = series["series"].replace("_total{", "_created{", 1)
            assert series["values"].split()[0].split("+")[0] == "0" or created in given, \
                (names, series)
    assert fired == {str(rule["alert"]) for rule in shipped_rules()}
