"""Prometheus metrics of the processor (served on ``/metrics`` by ``serve_metrics``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

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
DLQ = Counter("ledger_dlq_total", "Inputs sent to the DLQ, by source topic", ["topic"])
DECISION_SECONDS = Histogram(
    "ledger_decision_seconds",
    "Time to decode, decide and encode one input event",
    buckets=(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1),
)


def serve_metrics(port: int) -> None:
    """Serve ``/metrics`` on ``port`` in a daemon thread; 0 turns it off."""
    if port:
        start_http_server(port)
