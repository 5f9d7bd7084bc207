"""The processor's garbage collection: start-up objects frozen out of the collector, young
collections spaced out, every pause measured."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from ledger_stream.processor import collector


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if collector._measure in gc.callbacks:
        gc.callbacks.remove(collector._measure)


def _pauses(generation: str) -> float:
    return REGISTRY.get_sample_value("ledger_gc_pause_seconds_count",
                                     {"generation": generation}) or 0.0


@pytest.mark.usefixtures("restored")
def test_tune_freezes_start_up_spaces_collections_and_measures_pauses() -> None:
    collector.tune()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (collector.YOUNG, *collector.OLDER)
    before = _pauses("0")
    gc.collect(0)
    assert _pauses("0") == before + 1
    collector.tune()  # again: one callback, not two
    assert gc.callbacks.count(collector._measure) == 1
