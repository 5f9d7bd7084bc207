"""One connector process (``ledger-stream connector``): its target, leases and timeouts."""

from __future__ import annotations

from pydantic import Field, SecretStr

from ledger_stream.domain.validation import MAX_LEASE_MS
from ledger_stream.settings.group import MetricsPort, SettingsGroup, flat_config


class ConnectorSettings(SettingsGroup):
    """A connector's target and how it claims, calls and records (flat names
    ``connector_*``)."""

    model_config = flat_config("connector_")

    name: str | None = Field(None, description="target name intents carry")
    dsn: SecretStr | None = Field(None, description="PostgreSQL connector DSN")
    lease_ms: int = Field(  # a longer claim is refused (validation.py)
        30_000, ge=1, le=MAX_LEASE_MS, description="lease asked for each attempt (at most a "
        "day)")
    call_timeout_s: float = Field(10.0, gt=0, description="one call's timeout")
    record_margin_s: float = Field(
        2.0, ge=0, description="lease time kept to record the outcome"
    )
    lookup_delay_s: float = Field(
        0.0, ge=0, description="the target's consistency window before a lookup"
    )
    instance_id: str = Field("", description="this instance's id in claims")
    max_in_flight: int = Field(
        256, ge=1, description="dispatches one connector instance handles at once")
    fast_path: bool = Field(
        False, description="call a deduplicating target before the grant arrives (only live "
        "dispatches; needs a target declared to deduplicate)")
    fast_path_max_age_s: float = Field(
        60.0, gt=0, description="a dispatch older than this always waits for its grant")
    lookup_patience_s: float = Field(
        30.0, ge=0, description="how long a failing lookup is retried before the target is "
        "declared unqueryable for that key")
    metrics_port: MetricsPort = Field(
        None, description="connector /metrics port (0: any free port, logged; off: none)")
