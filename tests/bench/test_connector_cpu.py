"""The connector's CPU harness: the real loop with fake Kafka clients (no broker)."""

from __future__ import annotations

import pytest

from ledger_lab.bench.connector_cpu import SleepTarget, measure

pytestmark = pytest.mark.timeout(60)


def test_every_dispatch_is_claimed_granted_called_and_reported_once():
    figures = measure(lambda: SleepTarget(2), 60, 8, lambda _: None)
    assert figures["outcomes"] == {"succeeded": 60 + 30}  # the warm-up's and the run's
    assert figures["cpu_us_per_dispatch"] > 0
    assert figures["dispatches_per_s"] > 0
