"""How the processor decides: its group, checkpoints, clocks and the retry policy."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ledger_stream.settings.group import (
    MAX_ATTEMPTS,
    MAX_MS,
    MetricsPort,
    SettingsGroup,
    flat_config,
)

# The processor reads a batch as one record and consume(max_batch - 1): confluent_kafka
# refuses a consume of more than 1,000,000 messages.
MAX_BATCH = 1_000_000
# librdkafka's session.timeout.ms takes at most an hour.
MAX_SESSION_TIMEOUT_MS = 3_600_000


class ProcessorSettings(SettingsGroup):
    """The processor's group, its state, the clocks its deadlines use, and retries."""

    model_config = flat_config(instance_id="processor_instance_id")

    consumer_group: str = Field("ledger-processor", description="processor consumer group")
    state_dir: Path | None = Field(None, description="RocksDB state folder (default: HOME/state)")
    processing_guarantee: Literal["at-least-once", "exactly-once"] = Field(
        "exactly-once", description="exactly-once fences a paused or partitioned processor "
        "(its stale batch is aborted); at-least-once is faster but lets such a zombie "
        "append stale outputs")
    instance_id: str | None = Field(
        None, description="stable id of this processor (its transactional id); default: "
        "derived from the state folder, so a restart on the same folder fences its "
        "predecessor at once")
    max_batch: int = Field(2_000, ge=1, le=MAX_BATCH,
        description="input records decided per checkpoint")
    tick_interval_ms: int = Field(
        1_000, ge=10, le=MAX_MS, description="how often the processor appends a Tick to each quiet "
        "attempts partition it owns, so deadlines fire without traffic")
    clock_skew_ms: int = Field(
        2_000, ge=0, le=MAX_MS, description="margin between the broker's clock and a connector's, "
        "added to leases before a holder is presumed dead")
    clock_skew_bound_ms: int = Field(
        60_000, ge=0, le=MAX_MS,
        description="largest message.timestamp.before/after.max.ms accepted "
        "on input topics that use CreateTime (LogAppendTime needs no bound); with the "
        "pre-grant on, clock_skew_ms if smaller")
    stall_after_ms: int = Field(
        300_000, ge=1, le=MAX_MS, description="a granted key silent this long after its lease is "
        "reconciled; a dispatch unclaimed this long raises a stalled alert")
    reconcile_timeout_ms: int = Field(
        600_000, ge=1, le=MAX_MS,
        description="a reconciliation with no result this long goes to an "
        "operator, with an alert")
    lag_credit_ms: int = Field(
        3_600_000, ge=0, le=MAX_MS,
        description="the most a deadline waiting on the ledger's own output "
        "is moved past the partition clock for when that output left (the processor's wall "
        "clock): bounds what a processor clock ahead of the broker's delays a reconciliation")
    pregrant_lease_ms: int = Field(
        0, ge=0, le=MAX_MS, description="exactly once only: a fresh key's first Dispatch carries a "
        "lease this long for the connector that fences its record, which calls without "
        "waiting for a Grant (0, the default: off; at least once never pre-grants; 30000 "
        "takes a transaction off a fresh effect's path, at a cost on connector crashes: "
        "docs/design.md, 'The pre-granted first attempt')")
    session_timeout_ms: int = Field(
        10_000, ge=6_000, le=MAX_SESSION_TIMEOUT_MS,
        description="consumer session timeout: how fast a dead member's "
        "partitions move to the survivors"
    )
    group_protocol: Literal["classic", "consumer"] = Field(
        "classic", description="the processor's rebalance protocol: classic (eager range: "
        "every rebalance revokes every partition) or consumer (KIP-848, Kafka 4.0 or later: "
        "incremental, only the partitions that move pause; the session timeout becomes the "
        "group's consumer.session.timeout.ms, bounded by the brokers' "
        "group.consumer.min.session.timeout.ms)")
    metrics_port: MetricsPort = Field(
        9464, description="Prometheus /metrics port (0: any free port, logged; off: none)")
    retry_backoff_ms: int = Field(1_000, ge=0, le=MAX_MS,
        description="delay before a retried dispatch")
    max_attempts: int = Field(5, ge=1, le=MAX_ATTEMPTS,
        description="attempts before a retryable failure is final")
