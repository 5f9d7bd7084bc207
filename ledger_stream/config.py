"""One typed, frozen settings object for every command.

Precedence, highest first: CLI flags (passed as init arguments), environment variables with
the ``LEDGER_`` prefix, the TOML file named by ``LEDGER_CONFIG`` (or ``--config``), defaults.
This is the only module that reads the environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ledger_stream.kafka.client_config import reserved_in
from ledger_stream.logs import level_name

ENV_PREFIX = "LEDGER_"
DAY_MS = 24 * 3600 * 1000


def _default_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ledger-stream"


def shared_jar_cache() -> Path:
    """The user's one Kafka jar cache, whatever HOME a command is given: a cluster started
    with ``--home DIR`` reuses the jars instead of fetching them again."""
    return _default_home() / "jars"



def _port_or_off(value: Any) -> Any:
    """``off`` (or an empty value) is no port at all."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("off", "")):
        return None
    return value


# A TCP port for /metrics: 0 picks a free one (the process logs it), None ("off") serves none.
MetricsPort = Annotated[Annotated[int, Field(ge=0, le=65535)] | None, BeforeValidator(_port_or_off)]

class Settings(BaseSettings):
    """Everything a ledger-stream process can be told. Immutable once built."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="ignore", env_nested_delimiter="__",
        hide_input_in_errors=True,  # an invalid setting's error never quotes a password
    )

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        return level_name(value)

    @field_validator("kafka_client")
    @classmethod
    def _no_reserved_client_property(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = reserved_in(value)
        if reserved:
            raise ValueError(f"may not set {', '.join(reserved)}: the ledger sets them per "
                             "client, and its guarantees depend on them")
        return value

    @model_validator(mode="after")
    def _one_source_per_client_property(self) -> Settings:
        self.kafka_client_properties()  # a property set twice is refused at start-up
        return self

    # Kafka
    kafka_bootstrap: str | None = Field(
        None, description="existing cluster to use; when unset the local broker is used"
    )
    kafka_client: dict[str, str] = Field(
        default_factory=dict, repr=False,
        description="extra librdkafka properties for every Kafka client, for the cluster's "
        "security: security.protocol, sasl.mechanism, sasl.username, sasl.password, "
        "ssl.ca.location, ... (env: JSON object)")
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] | None = (
        Field(None, description="how every Kafka client connects (librdkafka "
              "security.protocol); SASL_SSL or SASL_PLAINTEXT for a cluster with ACLs"))
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="SASL mechanism (librdkafka sasl.mechanism)")
    kafka_sasl_username: str | None = Field(
        None, description="SASL user: the principal User:NAME the cluster's ACLs name")
    kafka_sasl_password: SecretStr | None = Field(
        None, description="SASL password (never logged or shown)")
    kafka_timeout_s: float = Field(
        5.0, gt=0, description="how long one request to Kafka (cluster metadata) waits before "
        "the cluster counts as unreachable: processes then say so and ask again, the SDK "
        "raises LedgerUnavailable")
    kafka_version: str = Field("4.1.1", description="Apache Kafka version of the local broker")
    home: Path = Field(default_factory=_default_home, description="cache for jars and broker data")
    jar_cache: Path | None = Field(None, description="Kafka jar cache (default: the user's "
                                   "~/.cache/ledger-stream/jars, shared by every HOME)")
    topic_prefix: str = Field("ledger", description="prefix of every ledger topic")
    partitions: int = Field(12, ge=1, description="partition count shared by all ledger topics")
    replication_factor: int = Field(1, ge=1, description="replication factor of ledger topics")
    replay_window_ms: int = Field(
        7 * DAY_MS, ge=1, description="how long a terminal key stays authoritative"
    )
    compaction_margin_ms: int = Field(
        7 * DAY_MS, ge=0, description="how much longer than the replay window the history "
        "topics keep every record of a key before compaction may drop the older ones: a "
        "processor that falls further behind could find an intent it never read compacted "
        "away (alerted at half of it: LedgerProcessorNearCompaction)")
    schema_registry_url: str | None = Field(
        None, description="use Confluent Schema Registry framing instead of single-object"
    )

    # Processor
    consumer_group: str = Field("ledger-processor", description="processor consumer group")
    state_dir: Path | None = Field(None, description="RocksDB state folder (default: HOME/state)")
    processing_guarantee: Literal["at-least-once", "exactly-once"] = Field(
        "exactly-once", description="exactly-once fences a paused or partitioned processor "
        "(its stale batch is aborted); at-least-once is faster but lets such a zombie "
        "append stale outputs")
    processor_instance_id: str | None = Field(
        None, description="stable id of this processor (its transactional id); default: "
        "derived from the state folder, so a restart on the same folder fences its "
        "predecessor at once")
    max_batch: int = Field(2_000, ge=1, description="input records decided per checkpoint")
    tick_interval_ms: int = Field(
        1_000, ge=10, description="how often the processor appends a Tick to each quiet "
        "attempts partition it owns, so deadlines fire without traffic")
    clock_skew_ms: int = Field(
        2_000, ge=0, description="margin between the broker's clock and a connector's, "
        "added to leases before a holder is presumed dead")
    clock_skew_bound_ms: int = Field(
        60_000, ge=0, description="largest message.timestamp.before/after.max.ms accepted "
        "on input topics that use CreateTime (LogAppendTime needs no bound)")
    stall_after_ms: int = Field(
        300_000, ge=1, description="a granted key silent this long after its lease is "
        "reconciled; a dispatch unclaimed this long raises a stalled alert")
    reconcile_timeout_ms: int = Field(
        600_000, ge=1, description="a reconciliation with no result this long goes to an "
        "operator, with an alert")
    lag_credit_ms: int = Field(
        3_600_000, ge=0, description="the most a deadline waiting on the ledger's own output "
        "is moved past the partition clock for when that output left (the processor's wall "
        "clock): bounds what a processor clock ahead of the broker's delays a reconciliation")
    dev_mode: bool = Field(
        False, description="development mode: approvals may also be signed with the "
        "shared HMAC secret (LEDGER_APPROVAL_SECRET, or a built-in public one)")
    session_timeout_ms: int = Field(
        10_000, ge=6_000, description="consumer session timeout: how fast a dead member's "
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
    metrics_host: str = Field(
        "127.0.0.1", description="address every /metrics listener binds (processor, "
        "connector); not a loopback address also lets the view and the gateway answer "
        "/metrics to peers beyond this host")
    retry_backoff_ms: int = Field(1_000, ge=0, description="delay before a retried dispatch")
    max_attempts: int = Field(5, ge=1, description="attempts before a retryable failure is final")

    # Connector (``ledger-stream connector``)
    connector_name: str | None = Field(None, description="target name intents carry")
    connector_dsn: SecretStr | None = Field(None, description="PostgreSQL connector DSN")
    connector_lease_ms: int = Field(30_000, ge=1, description="lease asked for each attempt")
    connector_call_timeout_s: float = Field(10.0, gt=0, description="one call's timeout")
    connector_record_margin_s: float = Field(
        2.0, ge=0, description="lease time kept to record the outcome"
    )
    connector_lookup_delay_s: float = Field(
        0.0, ge=0, description="the target's consistency window before a lookup"
    )
    connector_instance_id: str = Field("", description="this instance's id in claims")
    connector_max_in_flight: int = Field(
        64, ge=1, description="dispatches one connector instance handles at once")
    connector_fast_path: bool = Field(
        False, description="call a deduplicating target before the grant arrives (only live "
        "dispatches; needs a target declared to deduplicate)")
    connector_fast_path_max_age_s: float = Field(
        60.0, gt=0, description="a dispatch older than this always waits for its grant")
    connector_lookup_patience_s: float = Field(
        30.0, ge=0, description="how long a failing lookup is retried before the target is "
        "declared unqueryable for that key")
    connector_metrics_port: MetricsPort = Field(
        None, description="connector /metrics port (0: any free port, logged; off: none)")

    # Receipts view (``ledger-stream view``) and the clients that ask it
    view_url: str | None = Field(
        None, description="receipts view the SDK's status asks (e.g. http://127.0.0.1:8077); "
        "unset: status reads the key's partition")
    view_key: SecretStr | None = Field(
        None, description="API key the clients of the view send (a key of the tenant whose "
        "operations they read); the gateway forwards its caller's key instead")
    view_host: str = Field("127.0.0.1", description="address the view listens on")
    view_port: int = Field(8077, ge=0, le=65535, description="the view's HTTP port (0: any)")
    view_state_dir: Path | None = Field(None, description="view store (default: HOME/view)")
    view_timeline: bool = Field(
        True, description="the view also keeps every key's timeline (every record of every "
        "ledger topic, by key) for inspect, evidence and the gateway")

    # MCP server (``ledger-stream mcp``): what it offers is the operator's choice, not the model's
    mcp_tenant: str | None = Field(None, description="tenant of every operation the MCP "
                                   "server submits")
    mcp_effects: str | None = Field(None, description="effects the MCP server offers, "
                                    "NAME=ACTION@TARGET[FIELD,...][,...], the fields naming the "
                                    "business id its key is derived from (e.g. "
                                    "refund=refund@payments[invoice])")
    mcp_transport: Literal["stdio", "http"] = Field(
        "stdio", description="MCP transport: stdio, or streamable HTTP")
    mcp_host: str = Field("127.0.0.1", description="address the MCP server listens on (http)")
    mcp_port: int = Field(8078, ge=0, le=65535, description="the MCP server's HTTP port")

    # HTTP gateway (``ledger-stream api``)
    api_host: str = Field("127.0.0.1", description="address the gateway listens on")
    api_port: int = Field(8079, ge=0, le=65535, description="the gateway's port (0: any)")
    api_keys: SecretStr | None = Field(
        None, description="API keys, TENANT:operator:NAME=KEY or TENANT:agent=KEY, comma-"
        "separated (each key acts for its tenant; TENANT=KEY is an agent's)")
    api_keys_file: Path | None = Field(
        None, description="file of API keys, one TENANT:operator:NAME=KEY or "
        "TENANT:agent=KEY per line (# comments)")

    # Approval policy
    approval_secret: SecretStr | None = Field(
        None, description="development mode only: the shared HMAC key of approvals without "
        "a key id (ignored outside dev_mode, where approver keys sign)"
    )
    approval_keys_dir: Path | None = Field(
        None, description="directory of the approver public keys the ledger trusts, one "
        "KEY_ID.pub file each (PEM, as `ledger-stream approval-keys generate` writes)")
    approval_public_keys: str | None = Field(
        None, description="more trusted approver public keys, KEY_ID=BASE64[,KEY_ID=BASE64...] "
        "(the raw 32-byte Ed25519 key, base64)")
    approval_revoked_keys: tuple[str, ...] = Field(
        (), description="approver key ids whose approvals are refused, even when still listed")
    approval_signing_key: Path | None = Field(
        None, description="an approver's private key file (`approve`, the gateway's approval "
        "route); never needed by the processor")
    approval_required_actions: tuple[str, ...] = Field(
        (), description="action types that need a valid approval"
    )

    log_level: str = Field("INFO", description="log level: DEBUG, INFO, WARNING, ERROR or "
                           "CRITICAL")
    tracing: Literal["off", "otlp"] = Field(
        "off", description="export this process's spans: off, or otlp (the tracing extra; "
        "OTEL_EXPORTER_OTLP_* say where)")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(f"{ENV_PREFIX}CONFIG")
        if config_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)

    @property
    def resolved_state_dir(self) -> Path:
        return self.state_dir or self.home / "state"

    @property
    def resolved_view_dir(self) -> Path:
        return self.view_state_dir or self.home / "view"

    def kafka_client_properties(self) -> dict[str, str]:
        """The librdkafka properties every client of this process gets: ``kafka_client``
        with the typed SASL settings over it (a property set both ways is a ValueError:
        which one connects must never depend on an override order)."""
        typed = {
            "security.protocol": self.kafka_security_protocol,
            "sasl.mechanism": self.kafka_sasl_mechanism,
            "sasl.username": self.kafka_sasl_username,
            "sasl.password": (self.kafka_sasl_password.get_secret_value()
                              if self.kafka_sasl_password is not None else None),
        }
        chosen = {name: value for name, value in typed.items() if value is not None}
        both = sorted(set(chosen) & set(self.kafka_client))
        if both:
            raise ValueError(f"{', '.join(both)} set both in kafka_client and by its own "
                             "setting (LEDGER_KAFKA_SECURITY_PROTOCOL, ..._SASL_*): keep one")
        return {**self.kafka_client, **chosen}

    def topic(self, name: str) -> str:
        """Full name of a ledger topic, e.g. ``topic("intents") == "ledger.intents"``."""
        return f"{self.topic_prefix}.{name}"


def load_settings(config_file: str | None = None, **overrides: Any) -> Settings:
    """Build settings from flags (``overrides`` that are not None), env and file."""
    if config_file:
        os.environ[f"{ENV_PREFIX}CONFIG"] = config_file
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
