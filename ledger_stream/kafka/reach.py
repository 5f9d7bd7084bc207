"""Waiting for Kafka at start-up, saying what was tried.

A processor, connector or view started before its cluster is reachable (a wrong address, a
broker still starting, a network partition) must not sit silent: :func:`wait_for_kafka`
asks the bootstrap servers for cluster metadata, logs a warning naming the address, what it
asked and what failed within ``attempt_s`` seconds, and keeps asking with backoff until the
cluster answers or the process is told to stop.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.exceptions import kafka_error_text
from ledger_stream.logs import log_fields

logger = logging.getLogger(__name__)

ATTEMPT_S = 5.0
BACKOFF_MAX_S = 30.0


def wait_for_kafka(bootstrap: str, who: str, stop: threading.Event, *,
                   attempt_s: float = ATTEMPT_S, backoff_max_s: float = BACKOFF_MAX_S) -> bool:
    """True once Kafka at ``bootstrap`` answers a metadata request; False if ``stop`` was
    set first. ``who`` names the waiting process in the log lines."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    failures, delay = 0, 1.0
    while not stop.is_set():
        try:
            meta = admin.list_topics(timeout=attempt_s)
        except KafkaException as exc:
            failures += 1
            logger.warning("cannot reach Kafka; retrying", extra=log_fields(
                who=who, bootstrap=bootstrap, tried="metadata request to the bootstrap "
                f"servers ({attempt_s:g} s)", error=kafka_error_text(exc), attempt=failures,
                retry_in_s=delay))
            stop.wait(delay)
            delay = min(delay * 2, backoff_max_s)
            continue
        if failures:
            logger.info("reached Kafka", extra=log_fields(
                who=who, bootstrap=bootstrap, brokers=len(meta.brokers), attempts=failures + 1))
        return True
    return False
