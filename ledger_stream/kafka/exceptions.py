"""Errors raised while setting up or reaching Kafka. Each message is one line a user can act
on; a broker that failed to start adds the tail of its log on the following lines."""

from __future__ import annotations


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
    """The librdkafka error a KafkaException carries, as its one-line text."""
    error = exc.args[0] if exc.args else None
    text = getattr(error, "str", None)
    return str(text()) if callable(text) else str(exc)
