"""librdkafka properties every Kafka client of this process shares: our logging (librdkafka's
lines through Python logging, see ``clientlog``) and the cluster's connection settings, such as
SASL and TLS (the ``kafka_client`` setting, applied once at start-up by
:func:`use_client_settings`).

Every client the project creates spreads :data:`CLIENT_CONFIG` into its configuration, so a
cluster that needs ``security.protocol=SASL_SSL`` is reached the same way by the processor,
the connectors, the view, the tools and the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger_stream.kafka.clientlog import LOGGER, WARNING

# Defaults a deployment may override through ``kafka_client``.
#
# reconnect.backoff.ms: a new client sends its first request on the bootstrap connection and
# drops that connection once the answer names the broker's own address; a request still in
# flight on it is lost, and librdkafka picks a broker again only after a pause that follows
# this setting (its debug log: "still suppressed for 49ms" at the default 100 ms). Every new
# client's first metadata request paid it: ``list_topics`` on a new client took 55 ms, 16 ms
# with 20 (local broker, 15 clients each). A lost broker is still retried with exponential
# backoff up to reconnect.backoff.max.ms (10 s), from 20 ms instead of 100.
DEFAULTS: dict[str, Any] = {"reconnect.backoff.ms": 20}
CLIENT_CONFIG: dict[str, Any] = {"logger": LOGGER, "log_level": WARNING, **DEFAULTS}
_OURS = frozenset({"logger", "log_level"})

# Properties the ledger's correctness depends on: set per client by the project, never by a
# deployment (a different partitioner would move keys away from their state; a group,
# offset or transaction setting would break the commit order).
RESERVED = frozenset({
    "bootstrap.servers", "group.id", "group.instance.id", "partitioner",
    "enable.idempotence", "transactional.id", "isolation.level", "enable.auto.commit",
    "enable.auto.offset.store", "auto.offset.reset", "acks", "partition.assignment.strategy",
    "logger", "log_level", "on_delivery", "error_cb",
    # The group protocol and its timeouts come from LEDGER_GROUP_PROTOCOL and
    # LEDGER_SESSION_TIMEOUT_MS (the consumer protocol refuses the client-side timeouts).
    "group.protocol", "group.remote.assignor", "session.timeout.ms", "heartbeat.interval.ms",
})


# librdkafka's other names for reserved properties (topic-level forms take a "topic." prefix).
ALIASES = {"metadata.broker.list": "bootstrap.servers", "request.required.acks": "acks",
           "auto.commit.enable": "enable.auto.commit", "offset.store.method": "group.id",
           "queuing.strategy": "partitioner", "partitioner_cb": "partitioner"}


def canonical(name: str) -> str:
    """The property ``name`` stands for, whatever its spelling (case, spaces, "topic."
    prefix, alias)."""
    bare = name.strip().lower().removeprefix("topic.")
    return ALIASES.get(bare, bare)


def reserved_in(properties: Mapping[str, Any]) -> list[str]:
    """The properties in ``properties`` a deployment may not set (under any spelling)."""
    return sorted(name for name in properties if canonical(name) in RESERVED)


def use_client_settings(properties: Mapping[str, str]) -> None:
    """Every Kafka client created from now on gets ``properties`` over :data:`DEFAULTS`
    (ValueError for a reserved one). Replaces what an earlier call set."""
    reserved = reserved_in(properties)
    if reserved:
        raise ValueError(f"kafka_client may not set {', '.join(reserved)}")
    for name in [n for n in CLIENT_CONFIG if n not in _OURS]:
        del CLIENT_CONFIG[name]
    CLIENT_CONFIG.update(DEFAULTS)
    CLIENT_CONFIG.update(properties)
