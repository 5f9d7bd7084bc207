"""Prometheus metrics of a connector process."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

ATTEMPTS = Counter(
    "ledger_connector_attempts_total", "Calls to the target, by outcome", ["target", "outcome"]
)
CLAIM_ANSWERS = Counter(
    "ledger_connector_claim_answers_total", "Answers to claims, by kind", ["target", "answer"]
)
RECONCILIATIONS = Counter(
    "ledger_connector_reconciliations_total", "Lookups by key, by result", ["target", "result"]
)
TARGET_SECONDS = Histogram(
    "ledger_connector_target_seconds", "Latency of calls to the target", ["target"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
