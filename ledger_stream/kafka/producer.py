"""Producing ledger events: Avro-encoded, keyed by operation key, murmur2-partitioned.

Every ledger producer uses librdkafka's ``murmur2_random`` partitioner (librdkafka's default
is CRC32), so one key lands in the same partition number on every ledger topic, whichever
client (Java, quixstreams, this one) produced it. Producers are idempotent.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException, Producer

from ledger_stream.config import Settings
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.serde import AvroCodec


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "linger.ms": 5,
        **extra,
    }


class EventProducer:
    """Sends domain events to ledger topics by role ("intents", "attempts", ...)."""

    def __init__(
        self, settings: Settings, bootstrap: str, codec: AvroCodec | None = None, **extra: Any
    ) -> None:
        self._settings = settings
        self._codec = codec or AvroCodec()
        self._producer = Producer(producer_config(bootstrap, **extra))

    def send(self, role: str, event: Any) -> None:
        self.send_raw(role, event.key.encode("utf-8"), self._codec.encode(event))

    def send_raw(self, role: str, key: bytes | None, value: bytes | None) -> None:
        topic = self._settings.topic(role)
        while True:
            try:
                self._producer.produce(topic, value=value, key=key)
                break
            except BufferError:
                self._producer.poll(0.1)  # local queue full: let deliveries drain
        self._producer.poll(0)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every send to be acknowledged; raises KafkaSetupError if some are not."""
        try:
            left = self._producer.flush(timeout_s)
        except KafkaException as exc:
            raise KafkaSetupError(f"producer flush failed: {exc}") from exc
        if left:
            raise KafkaSetupError(f"{left} events not acknowledged after {timeout_s} s")

    def close(self, timeout_s: float = 30.0) -> None:
        """Flush, then release the client (librdkafka closes its connections)."""
        self.flush(timeout_s)
        del self._producer
