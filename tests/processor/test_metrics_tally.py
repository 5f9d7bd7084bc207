"""A batch adds its decisions to the metrics once per batch, not once per record: each series
it touched moves once, by what the batch counted, and the decision-time histogram ends
where observing each decision would have left it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram

from ledger_stream.domain.policy import Policy
from ledger_stream.processor import metrics
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.step import _child
from ledger_stream.state import RocksDBPartitionStore
from tests.factories import intent
from tests.processor.fakes import ATTEMPTS, INTENTS, PARTITIONS, make_step, record_of

pytestmark = pytest.mark.timeout(30)
BUCKETS = metrics.DECISION_SECONDS._upper_bounds  # noqa: SLF001 - the same bounds


def _samples(histogram: Histogram) -> dict[str, float]:
    return {f"{s.name}{sorted(s.labels.items())}": s.value
            for family in histogram.collect() for s in family.samples
            if not s.name.endswith("_created")}


def test_observing_all_at_once_ends_where_observing_each_does() -> None:
    amounts = [0.00001, 0.00005, 0.00007, 0.0001, 0.0003, 0.002, 0.05, 0.1, 0.2, 7.0, 0.0]
    each = Histogram("each_seconds", "t", registry=CollectorRegistry(), buckets=BUCKETS[:-1])
    at_once = Histogram("each_seconds", "t", registry=CollectorRegistry(), buckets=BUCKETS[:-1])
    for amount in amounts:
        each.observe(amount)
    metrics.observe_all(at_once, amounts)
    metrics.observe_all(at_once, [])
    assert _samples(at_once) == pytest.approx(_samples(each))

    class Plain:  # a client without the bucket internals observe_all reads
        def __init__(self) -> None:
            self.seen: list[float] = []

        def observe(self, amount: float) -> None:
            self.seen.append(amount)

    plain = Plain()
    metrics.observe_all(plain, amounts)
    assert plain.seen == amounts


class Counted:
    """A series' ``inc``, counting its calls."""

    def __init__(self, series: Any) -> None:
        self.calls: list[float] = []
        self._inc = series.inc

    def __call__(self, amount: float = 1) -> None:
        self.calls.append(amount)
        self._inc(amount)


def test_a_batch_moves_each_series_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    stores = {p: RocksDBPartitionStore(tmp_path / f"p{p}", p) for p in range(PARTITIONS)}
    accepted = _child(metrics.DECISIONS, "Intent", "accepted")
    duplicate = _child(metrics.DECISIONS, "Intent", "duplicate")
    counted = {name: Counted(series) for name, series in
               (("accepted", accepted), ("duplicate", duplicate))}
    for name, series in (("accepted", accepted), ("duplicate", duplicate)):
        monkeypatch.setattr(series, "inc", counted[name])
    observed: list[float] = []
    monkeypatch.setattr(metrics.DECISION_SECONDS, "observe", observed.append)
    seconds_before = metrics.DECISION_SECONDS._sum.get()  # noqa: SLF001
    keys = [f"acme/pay/k{i}" for i in range(30)]
    records = [record_of(intent(key), INTENTS, i, 1_000 + i)
               for i, key in enumerate(keys + keys[:4])]  # four duplicates
    batch = Batch(make_step(Policy()), stores, {}, (INTENTS, ATTEMPTS))  # type: ignore[arg-type]
    batch.add_all(records)  # type: ignore[arg-type]
    assert counted["accepted"].calls == [30]
    assert counted["duplicate"].calls == [4]
    assert observed == []  # the histogram's buckets move once per batch, not per decision
    assert metrics.DECISION_SECONDS._sum.get() > seconds_before  # noqa: SLF001
    for store in stores.values():
        store.close()
