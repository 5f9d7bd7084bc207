"""How every client reaches Kafka: the cluster, its security, and the schema registry."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ledger_stream.kafka.client_config import reserved_in
from ledger_stream.settings.group import SettingsGroup, flat_config


class ConnectionSettings(SettingsGroup):
    """The Kafka cluster and how to authenticate to it (flat names ``kafka_*``)."""

    model_config = flat_config("kafka_", schema_registry_url="schema_registry_url")

    bootstrap: str | None = Field(
        None, description="existing cluster to use; when unset the local broker is used"
    )
    client: dict[str, str] = Field(
        default_factory=dict, repr=False,
        description="extra librdkafka properties for every Kafka client, for the cluster's "
        "security: security.protocol, sasl.mechanism, sasl.username, sasl.password, "
        "ssl.ca.location, ... (env: JSON object)")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] | None = (
        Field(None, description="how every Kafka client connects (librdkafka "
              "security.protocol); SASL_SSL or SASL_PLAINTEXT for a cluster with ACLs"))
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="SASL mechanism (librdkafka sasl.mechanism)")
    sasl_username: str | None = Field(
        None, description="SASL user: the principal User:NAME the cluster's ACLs name")
    sasl_password: SecretStr | None = Field(
        None, description="SASL password (never logged or shown)")
    timeout_s: float = Field(
        5.0, gt=0, description="how long one request to Kafka (cluster metadata) waits before "
        "the cluster counts as unreachable: processes then say so and ask again, the SDK "
        "raises LedgerUnavailable")
    startup_wait_s: float = Field(
        300.0, gt=0, description="how long a starting processor, connector or view waits "
        "out a cluster that does not answer its start-up checks (a broker restarting, the "
        "partition holding the recorded layout without a leader until its replica returns) "
        "before it refuses to start; a real layout mismatch is refused at once")
    schema_registry_url: str | None = Field(
        None, description="use Confluent Schema Registry framing instead of single-object"
    )

    @field_validator("client")
    @classmethod
    def _no_reserved_client_property(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = reserved_in(value)
        if reserved:
            raise ValueError(f"may not set {', '.join(reserved)}: the ledger sets them per "
                             "client, and its guarantees depend on them")
        return value

    @model_validator(mode="after")
    def _one_source_per_client_property(self) -> ConnectionSettings:
        self.client_properties()  # a property set twice is refused at start-up
        return self

    def client_properties(self) -> dict[str, str]:
        """The librdkafka properties every client of this process gets: ``client`` with the
        typed SASL settings over it (a property set both ways is a ValueError: which one
        connects must never depend on an override order)."""
        typed = {
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": (self.sasl_password.get_secret_value()
                              if self.sasl_password is not None else None),
        }
        chosen = {name: value for name, value in typed.items() if value is not None}
        both = sorted(set(chosen) & set(self.client))
        if both:  # each by its flat name: the refusal says where each came from
            own = ", ".join("kafka_" + name.replace(".", "_") for name in both)
            raise ValueError(f"{', '.join(both)} set both in kafka_client and by {own}: "
                             "keep one")
        return {**self.client, **chosen}
