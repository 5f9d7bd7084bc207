"""The processor's Kafka client settings, in one place, with the reason for each."""

from __future__ import annotations

import threading
from typing import Any

from ledger_stream.config import Settings
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.producer import producer_config
from ledger_stream.processor.at_least_once import AtLeastOnceDelivery
from ledger_stream.processor.delivery import Delivery, ExactlyOnceDelivery
from ledger_stream.processor.exceptions import BatchAbandoned, ProcessorError

# librdkafka's own log lines go through Python logging: one structured line each.
LIBRDKAFKA = CLIENT_CONFIG

# Short enough that a processor that died with an open transaction blocks read_committed
# readers (and the next owner's restore) only briefly; long enough for one batch.
TRANSACTION_TIMEOUT_MS = 10_000


def transactional_id(group: str, instance: str) -> str:
    """The first lane's transactional id; the second lane's adds ``.b``
    (``delivery.lane_ids``). Both start with ``<group>.``, the prefix the ACLs grant."""
    return f"{group}.{instance}"


def consumer_config(settings: Settings, bootstrap: str) -> dict[str, Any]:
    return {
        **LIBRDKAFKA,  # first: nothing below may be replaced by a deployment's settings
        "bootstrap.servers": bootstrap,
        "group.id": settings.processor.consumer_group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        # Only committed records: Ticks (and everything else a transaction wrote) of a
        # fenced processor never reach a decision.
        "isolation.level": "read_committed",
        **_group_protocol(settings),
        # librdkafka's default long poll (500 ms) queues metadata requests behind it.
        "fetch.wait.max.ms": 50,
    }


def _group_protocol(settings: Settings) -> dict[str, Any]:
    if settings.processor.group_protocol == "consumer":
        # KIP-848: the broker assigns, incrementally; its range assignor gives one member
        # both intents-p and attempts-p once the group is stable (assignment.py holds a
        # partition that comes without its co-partition until it does). Timeouts are the
        # group's configuration (group_config below), not the client's.
        return {"group.protocol": "consumer", "group.remote.assignor": "range"}
    # Eager range assignment gives one member both intents-p and attempts-p (the topics
    # share a partition count), and revokes everything before reassigning.
    return {
        "partition.assignment.strategy": "range",
        "session.timeout.ms": settings.processor.session_timeout_ms,
        "heartbeat.interval.ms": heartbeat_ms(settings),
    }


def heartbeat_ms(settings: Settings) -> int:
    return max(1_000, settings.processor.session_timeout_ms // 5)


def group_config(settings: Settings) -> dict[str, str]:
    """The group's own configuration under the consumer protocol (KIP-848): its members'
    session timeout and heartbeat interval (the interval also bounds how soon a member
    hears of partitions to give up or take)."""
    return {"consumer.session.timeout.ms": str(settings.processor.session_timeout_ms),
            "consumer.heartbeat.interval.ms": str(heartbeat_ms(settings))}


def changelog_reader_config(bootstrap: str) -> dict[str, Any]:
    """A client for restores: assigned partitions only, never a group member."""
    return {
        **LIBRDKAFKA,
        "bootstrap.servers": bootstrap,
        "group.id": "ledger-restore-unused",  # required by the client, never joined
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "fetch.wait.max.ms": 50,
    }


def changelog_ends_config(bootstrap: str) -> dict[str, Any]:
    """A client that only asks for the changelog's high watermarks (read_uncommitted: the
    end of the log, past any transaction still open, which the restorer's read-committed
    end would stop before)."""
    return {**changelog_reader_config(bootstrap), "isolation.level": "read_uncommitted"}


def producer_settings(bootstrap: str, transactional: str | None) -> dict[str, Any]:
    """Idempotent, murmur2-partitioned; transactional when ``transactional`` is an id.

    No linger: every batch ends in a flush (and, exactly once, a commit) that waits for its
    records, and librdkafka's flush does not send what lingers at once: 5 ms of linger
    added about 3 ms to every batch's transaction (13.4 against 10.4 ms, interleaved), and
    a fresh submit waits for three batches. Records produced while a request is in flight
    still share the next one."""
    config = producer_config(bootstrap, acks="all", **{"linger.ms": 0})
    if transactional is not None:
        config["transactional.id"] = transactional
        config["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
    return config


def delivery_for(settings: Settings, bootstrap: str, instance: str,
                 consumer: Consumer, stop: threading.Event | None = None) -> Delivery:
    """The delivery the processing guarantee names, its producer started (transactional
    under exactly once, named for the group and ``instance``); ProcessorError, one line,
    when the producer cannot start; StopRequested when ``stop`` is set (a SIGTERM) while
    it starts."""
    group = settings.processor.consumer_group
    exactly_once = settings.processor.processing_guarantee == "exactly-once"
    producer = producer_settings(
        bootstrap, transactional_id(group, instance) if exactly_once else None)
    try:
        if exactly_once:
            return ExactlyOnceDelivery(producer, settings.topic("changelog"), stop)
        return AtLeastOnceDelivery(producer, settings.topic("changelog"), consumer)
    except BatchAbandoned as exc:
        raise ProcessorError(f"cannot start the producer: {exc.reason}") from exc
