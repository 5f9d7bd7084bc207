"""Prometheus metrics of the processor (served on ``/metrics`` by ``serve_metrics``)."""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any, get_args

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from ledger_stream.domain.events import AlertKind
from ledger_stream.logs import log_fields
from ledger_stream.processor.exceptions import AbandonKind

logger = logging.getLogger(__name__)

DECISIONS = Counter(
    "ledger_decisions_total", "Events decided, by event type and outcome", ["event", "outcome"]
)
DUPLICATES_SUPPRESSED = Counter(
    "ledger_duplicates_suppressed_total", "Duplicate intents answered with the original receipt"
)
CONFLICTS = Counter(
    "ledger_conflicts_total", "Intents rejected for conflicting arguments"
)
ALERTS = Counter("ledger_alerts_total", "Alerts raised, by kind", ["kind"])
OPERATOR_QUEUE = Gauge(
    "ledger_operator_queue",
    "Keys this process moved into needs_reconciliation minus those it moved out "
    "(per process, since start: sum over processors; `ledger-stream reconcile list` is exact)",
)
CONTAINMENT = Counter(
    "ledger_containment_events_total",
    "Freeze and unfreeze records read, per partition that read one: kind freeze, unfreeze, "
    "or repeat (an event id applied already, ignored)", ["kind"])
DLQ = Counter("ledger_dlq_total", "Inputs sent to the DLQ, by source topic", ["topic"])
GC_PAUSE = Histogram(
    "ledger_gc_pause_seconds", "Pauses of the cyclic garbage collector, by generation",
    ["generation"], buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25))
DECISION_SECONDS = Histogram(
    "ledger_decision_seconds",
    "Time to decode, decide and encode one input event (Ticks and Timers not included)",
    buckets=(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1),
)
BATCHES = Counter("ledger_batches_total", "Batches committed (offsets and outputs durable)")
BATCH_RECORDS = Histogram(
    "ledger_batch_records", "Input records per committed batch",
    buckets=(1, 10, 50, 100, 250, 500, 1000, 2000, 5000),
)
ABANDONED = Counter(
    "ledger_batches_abandoned_total",
    "Batches dropped before their commit (their inputs are decided again), by reason",
    ["reason"],
)
TIMERS = Counter(
    "ledger_timers_fired_total",
    "Deadlines that came, by kind (stalled, lease, reconcile, seal; stale: no longer due)",
    ["kind"],
)
TICKS = Counter("ledger_ticks_total", "Tick records appended to quiet attempts partitions")
RESTORE_SECONDS = Histogram(
    "ledger_restore_seconds", "Time to catch one partition's store up from the changelog",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
)
RESTORE_RECORDS = Counter(
    "ledger_restore_records_total",
    "Changelog records read while restoring, by result (applied; skipped: uncommitted "
    "batch or another group)", ["result"],
)
PARTITIONS_HELD = Gauge(
    "ledger_partitions_held",
    "Partitions the group gave one topic of and not the other (consumer protocol): held, "
    "not read, until the co-partition comes; one that stays held is never decided",
)
CLOCK_LAG = Gauge(
    "ledger_partition_clock_lag_seconds",
    "Wall clock minus the partition clock (the newest broker timestamp decided), per "
    "owned partition: how far behind real time deadlines are judged", ["partition"],
)
LAYOUT_CHANGED = Gauge(
    "ledger_partition_layout_changed",
    "1 while this processor stopped deciding because the topics' partition count left the "
    "layout its state was built under (`ledger-stream repartition --to N` moves the state)",
)

POLICY_INFO = Gauge(
    "ledger_decision_policy_info",
    "1 for the revision of the decision policy this processor decides under (a digest of "
    "the ledger-wide and per-action knobs): processors that disagree show two revisions",
    ["revision"],
)
OTHER_POLICY = Counter(
    "ledger_partitions_from_other_policy_total",
    "Partitions this processor took whose last committed batch was decided under another "
    "policy revision (named): expected once per partition in a rolling policy change",
    ["revision"],
)


class Tally:
    """One batch's counts, added to the metrics once per batch (``flush``) instead of once
    per decision: a series' ``inc`` takes a lock (about 1.3 µs here), a histogram's
    ``observe`` twice that, and a batch touches the same few series hundreds of times."""

    __slots__ = ("counts", "seconds")

    def __init__(self) -> None:
        self.counts: dict[Any, float] = {}  # a Counter's or Gauge's series -> its change
        self.seconds: list[float] = []  # DECISION_SECONDS observations

    def add(self, series: Any, amount: float = 1) -> None:
        self.counts[series] = self.counts.get(series, 0) + amount

    def flush(self) -> None:
        """Add what was counted since the last flush to the metrics; start again."""
        counts, self.counts = self.counts, {}
        for series, amount in counts.items():
            series.inc(amount)
        seconds, self.seconds = self.seconds, []
        observe_all(DECISION_SECONDS, seconds)


def observe_all(histogram: Any, amounts: list[float]) -> None:
    """``histogram.observe`` for each of ``amounts``, each bucket and the sum touched once.
    It reads the client's bucket bounds and series, which are not its public API
    (tests/processor/test_metrics_tally.py checks the result against ``observe``); a client
    without them gets one ``observe`` per amount."""
    if not amounts:
        return
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for amount in amounts:
            histogram.observe(amount)
        return
    per_bucket = [0] * len(bounds)
    for amount in amounts:  # observe's bucket: the first bound at or above the amount
        per_bucket[bisect_left(bounds, amount)] += 1
    total.inc(sum(amounts))
    for bucket, count in zip(buckets, per_bucket, strict=True):
        if count:
            bucket.inc(count)


def start_series(input_topics: Iterable[str]) -> None:
    """Create at 0 every labelled series that an alert rule (deploy/prometheus/alerts.yml)
    watches for an increase: one per alert kind (every member of :class:`AlertKind`, so a new
    kind is covered without a change here), per DLQ source topic (``input_topics``) and per
    abandon reason (:data:`AbandonKind`).

    Why: Prometheus computes ``increase()`` between samples it holds. A series whose first
    sample is already 1 has no earlier sample, so ``increase(...) > 0`` never sees its first
    step, and the first ``duplicate_effect`` after each start would raise no alert.
    Idempotent; call it when the processor starts, before it decides anything."""
    for kind in AlertKind:
        ALERTS.labels(kind.value)
    for topic in input_topics:
        DLQ.labels(topic)
    for reason in get_args(AbandonKind):
        ABANDONED.labels(reason)


def serve_metrics(port: int | None, who: str, host: str = "127.0.0.1",
                  ) -> tuple[str, int] | None:
    """Serve ``/metrics`` on ``host``:``port`` in a daemon thread (0: a free port) and log
    where; the address bound, or None when ``port`` is None (off). The default host is
    loopback: metrics say how much every tenant does, so reaching them from beyond this host
    is the operator's choice (``--metrics-host``)."""
    if port is None:
        return None
    server, _ = start_http_server(port, addr=host)
    bound = server.server_address
    served = (str(bound[0]), int(bound[1]))
    logger.info("metrics served", extra=log_fields(
        who=who, port=served[1], url=f"http://{host}:{served[1]}/metrics"))
    return served
