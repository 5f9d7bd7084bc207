"""The connector's CPU harness: the real loop with fake Kafka clients (no broker)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ledger_lab.bench.connector_cpu import SleepTarget, measure
from ledger_stream.connector import collector

pytestmark = pytest.mark.timeout(60)


def test_every_dispatch_is_claimed_granted_called_and_reported_once():
    figures = measure(lambda: SleepTarget(2), 60, 8, lambda _: None)
    assert figures["outcomes"] == {"succeeded": 60 + 30}  # the warm-up's and the run's
    assert figures["cpu_us_per_dispatch"] > 0
    assert figures["dispatches_per_s"] > 0


@pytest.fixture
def gc_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)  # CPython's defaults, as a connector process starts
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("gc_restored")
def test_serving_freezes_start_up_and_spaces_young_collections_out():
    """The loop's garbage goes to the collector, what start-up built does not: about 15 µs
    of CPU per dispatch with CPython's defaults (connector/collector.py)."""
    measure(lambda: SleepTarget(2), 20, 4, lambda _: None)
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (collector.YOUNG, *collector.OLDER)
