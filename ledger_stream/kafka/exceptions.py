"""Errors raised while setting up or reaching Kafka. Each message is one line a user can act
on; a broker that failed to start adds the tail of its log on the following lines."""

from __future__ import annotations

import re


class KafkaSetupError(Exception):
    """Base of every error in ``ledger_stream.kafka``."""


class ToolMissingError(KafkaSetupError):
    """``java`` or ``mvn`` is not on PATH."""


class JarFetchError(KafkaSetupError):
    """Maven could not fetch the Kafka jars; nothing was marked complete, the next try refetches."""


class PortInUseError(KafkaSetupError):
    """A configured port is already taken by another process."""


class BrokerStartError(KafkaSetupError):
    """A broker process exited or did not answer in time. The message ends with its log tail."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        super().__init__(f"{message}\n--- broker log tail ---\n{log_tail}" if log_tail else message)


class ClusterStateError(KafkaSetupError):
    """The cluster folder holds a cluster that does not match the request (e.g. node count)."""


class NoKafkaError(KafkaSetupError):
    """No bootstrap configured and no local cluster running."""


class TopicConfigMismatch(KafkaSetupError):
    """Existing ledger topics differ from the settings (partitions, replication or configs).

    ``differences`` maps each differing topic to what differs; nothing was altered.
    """

    def __init__(self, differences: dict[str, tuple[str, ...]]) -> None:
        self.differences = differences
        detail = "; ".join(f"{topic}: {', '.join(diff)}" for topic, diff in differences.items())
        super().__init__(f"ledger topics differ from the settings (not altered): {detail}")


class DeliveryFailed(KafkaSetupError):
    """The broker refused a produced record, or did not acknowledge it in time. Nothing that
    depends on that record may be treated as done (no offset commit, no "submitted")."""


def kafka_error_text(exc: BaseException) -> str:
    """The librdkafka error a KafkaException carries, as its one-line text; a refused client
    configuration as :func:`client_config_refusal` says it (never the refused value)."""
    refusal = client_config_refusal(exc)
    if refusal is not None:
        return refusal
    error = exc.args[0] if exc.args else None
    text = getattr(error, "str", None)
    return str(text()) if callable(text) else str(exc)


_PROPERTY = re.compile(r'configuration property:? "([^"]*)"')


def client_config_refusal(exc: BaseException) -> str | None:
    """The line for a Kafka client that refused its configuration (LEDGER_KAFKA_CLIENT, a
    settings file's [kafka_client]): librdkafka's error names the property, and the value
    too (``Invalid value "..." for configuration property "..."``): a password or key
    given there must not be printed, so the line names the property only. None for any
    other exception."""
    if type(exc).__name__ != "KafkaException" or not exc.args:
        return None
    from confluent_kafka import KafkaError

    error = exc.args[0]
    if not isinstance(error, KafkaError) or error.code() != KafkaError._INVALID_ARG:
        return None
    found = _PROPERTY.search(error.str())
    if found is None:
        return None
    what = "is unknown" if "No such configuration property" in error.str() else \
        "has a value it does not accept (not shown)"
    return (f"the Kafka client refuses its configuration: property {found.group(1)!r} "
            f"{what} (LEDGER_KAFKA_CLIENT or the settings file's client properties)")
