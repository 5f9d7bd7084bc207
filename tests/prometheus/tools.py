"""The Prometheus binaries the monitoring tests run (Debian's ``prometheus`` package has both
``prometheus`` and ``promtool``). A missing one fails the test that needs it, naming the
install command: the shipped rules must be checked by the real engine, never skipped."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = Path(__file__).resolve().parent / "alerts_test.yml"
INSTALL = "apt-get install -y prometheus  (Debian's package: prometheus and promtool)"


def binary(name: str) -> str:
    """The path of ``name`` (``prometheus`` or ``promtool``); AssertionError naming the
    install command when it is not on PATH."""
    path = shutil.which(name)
    assert path, f"{name} not found: the alert rules are tested with it; {INSTALL}"
    return path


def shipped_rules() -> list[dict[str, object]]:
    """Every alerting rule of deploy/prometheus/alerts.yml, in file order."""
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]
