"""Checks before the processor reads anything: the topics exist, share the partition count
the state was built under (kafka/layout.py; a fresh deployment records it), and the input
topics' record timestamps come from a clock the processor may trust.

Decisions read the partition clock (the records' broker timestamps). With
``message.timestamp.type=LogAppendTime`` the broker stamps each record; with CreateTime the
producer's clock does, and that is accepted only when the broker bounds how far it may be
from its own (``message.timestamp.before.max.ms`` and ``message.timestamp.after.max.ms``
both within ``clock_skew_bound_ms``; within ``clock_skew_ms`` with the pre-grant on).
Otherwise the processor refuses to start, saying how to fix the topic.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from ledger_stream.config import Settings
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.layout import Layout, LayoutRefused, check_layout
from ledger_stream.kafka.reach import StopRequested, admin_answer, keep_asking
from ledger_stream.logs import log_fields
from ledger_stream.processor.clients import group_config
from ledger_stream.processor.exceptions import StartupRefused

logger = logging.getLogger(__name__)

INPUTS = ("intents", "attempts")
OUTPUTS = ("dispatch", "receipts", "alerts", "dlq", "changelog")
BEFORE = "message.timestamp.before.max.ms"
AFTER = "message.timestamp.after.max.ms"


def timestamp_problem(topic: str, config: Mapping[str, str | None], bound_ms: int,
                      bound_name: str = "clock_skew_bound_ms") -> str | None:
    """Why ``topic``'s timestamps cannot be trusted as the partition clock, or None."""
    kind = config.get("message.timestamp.type")
    if kind == "LogAppendTime":
        return None
    wide = [name for name in (BEFORE, AFTER) if _int(config.get(name)) > bound_ms]
    if not wide:
        return None
    return (f"{topic} uses {kind or 'CreateTime'} timestamps and lets producer clocks "
            f"drift more than {bound_name}={bound_ms} ({', '.join(wide)}): set "
            f"message.timestamp.type=LogAppendTime on it (kafka-configs --alter "
            f"--entity-type topics --entity-name {topic} --add-config "
            f"message.timestamp.type=LogAppendTime), or bound both {BEFORE} and {AFTER}")


def _int(value: str | None) -> int:
    try:
        return int(value) if value is not None else 2**63 - 1
    except ValueError:
        return 2**63 - 1


TOPIC_PATIENCE_S = 10.0  # how long a topic just created may take to show in metadata


def listed_topics(admin: AdminClient, names: list[str], timeout_s: float,
                  patience_s: float = TOPIC_PATIENCE_S, wait_s: float = 0.0,
                  stop: threading.Event | None = None) -> tuple[dict[str, Any], list[str]]:
    """The cluster's topics, and which of ``names`` are missing from them. A topic just
    created (``topics create`` right before the processor starts) can take a moment to reach
    the metadata a broker serves, so missing ones are asked for again for ``patience_s``
    before they count as missing. A cluster that does not answer (each try bounded by
    ``timeout_s``) is asked again for ``wait_s``; StartupRefused when it never answered,
    StopRequested when ``stop`` is set first."""
    deadline = time.monotonic() + patience_s
    answer_by = time.monotonic() + wait_s
    pause = stop.wait if stop is not None else time.sleep
    while True:
        try:
            found: dict[str, Any] = keep_asking(
                lambda: admin.list_topics(timeout=timeout_s).topics, stop,
                "Kafka did not answer the start-up check; retrying",
                wait_s=max(0.0, answer_by - time.monotonic()))
        except KafkaException as exc:
            raise StartupRefused(f"Kafka did not answer: {exc}") from exc
        missing = [name for name in names if name not in found]
        if not missing or time.monotonic() >= deadline:
            return found, missing
        pause(0.5)


def clock_bound(settings: Settings, pregranted: bool) -> tuple[int, str]:
    """How far (ms) a CreateTime input topic may let producer clocks drift, and the setting
    that says so. With the pre-grant on, a claim is judged by its own record's time against
    the pre-grant's end, and the pre-grant's timers allow ``clock_skew_ms`` for clocks that
    differ: a producer clock further off could make a claim look appended before the end
    (or an intent move the clock past it early)."""
    p = settings.processor
    if pregranted and p.clock_skew_ms < p.clock_skew_bound_ms:
        return p.clock_skew_ms, "clock_skew_ms (the pre-grant is on)"
    return p.clock_skew_bound_ms, "clock_skew_bound_ms"


def check_topics(bootstrap: str, settings: Settings, timeout_s: float = 30.0,
                 stop: threading.Event | None = None, pregranted: bool = False) -> Layout:
    """The layout the state was built under, which the topics are at. Raises
    StartupRefused naming the fix when a topic is missing, the partition counts differ from
    each other or from the recorded layout (recorded here when there is none yet), or an
    input topic's clock is not bounded. A cluster that does not answer (a broker
    restarting, the layout's partition without a leader) is waited out for
    ``settings.connection.startup_wait_s`` before refusing; a set ``stop`` (SIGTERM) ends
    that wait within about ``settings.connection.timeout_s``, and the configs' and the
    group's requests within about a second (StopRequested)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    names = {role: settings.topic(role) for role in INPUTS + OUTPUTS}
    wait_s = settings.connection.startup_wait_s
    found, missing = listed_topics(admin, sorted(names.values()),
                                   min(timeout_s, wait_s, settings.connection.timeout_s),
                                   wait_s=wait_s, stop=stop)
    if missing:
        raise StartupRefused(f"missing topics {', '.join(missing)}: run `ledger-stream "
                             "topics create` with the same settings")
    counts = {names[r]: len(found[names[r]].partitions) for r in (*INPUTS, "changelog")}
    try:  # the counts agree with each other and with the layout the state was built under
        layout = check_layout(bootstrap, names["changelog"], counts, record=True,
                              timeout_s=wait_s, stop=stop)
    except LayoutRefused as exc:
        raise StartupRefused(str(exc)) from exc
    bound, bound_name = clock_bound(settings, pregranted)
    for role in INPUTS:
        problem = timestamp_problem(names[role], _describe(admin, names[role], timeout_s, stop),
                                    bound, bound_name)
        if problem:
            raise StartupRefused(problem)
    if settings.processor.group_protocol == "consumer":
        configure_group(admin, settings.processor.consumer_group, group_config(settings),
                        timeout_s, stop)
    return layout or Layout(next(iter(counts.values())))


def configure_group(admin: AdminClient, group: str, config: Mapping[str, str],
                    timeout_s: float, stop: threading.Event | None = None) -> bool:
    """Set the consumer group's own session timeout and heartbeat interval (KIP-848 group
    configuration). Brokers that refuse them (a value below their
    group.consumer.min.* bounds, or no group configurations at all) leave the group on the
    brokers' defaults: a slower move of a dead member's partitions, never a wrong decision,
    so that is a warning naming the broker settings, not a refusal. A set ``stop`` ends the
    wait for the answer (StopRequested)."""
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
               for name, value in config.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    try:
        future = admin.incremental_alter_configs([resource], request_timeout=timeout_s)
        admin_answer(admin, future[resource], timeout_s, stop,
                     f"setting group {group}'s session timeout")
        return True
    except (KafkaException, TimeoutError) as exc:
        error = exc.args[0].str() if isinstance(exc, KafkaException) else "no answer"
        logger.warning("the brokers refused the group's session timeout; its members use "
                       "the brokers' group.consumer.session.timeout.ms and "
                       "heartbeat interval (lower group.consumer.min.session.timeout.ms "
                       "and group.consumer.min.heartbeat.interval.ms to allow these)",
                       extra=log_fields(group=group, error=error, config=dict(config)))
        return False


DESCRIBE_ATTEMPTS = 4


def _describe(admin: AdminClient, topic: str, timeout_s: float,
              stop: threading.Event | None = None) -> dict[str, str | None]:
    """The topic's configs. A timeout or a retriable error (the controller went away: the
    chaos soak saw a processor refuse to start on "Timed out waiting for controller") is
    asked again; only a lasting failure refuses the start. A set ``stop`` ends the wait for
    an answer, and the pause between tries (StopRequested)."""
    step = f"describing topic {topic}"
    pause = stop.wait if stop is not None else time.sleep
    resource = ConfigResource(ResourceType.TOPIC, topic)
    failure: Exception
    for attempt in range(1, DESCRIBE_ATTEMPTS + 1):
        try:
            future = admin.describe_configs([resource], request_timeout=timeout_s)[resource]
            entries = admin_answer(admin, future, timeout_s, stop, step)
            return {name: entry.value for name, entry in entries.items()}
        except KafkaException as exc:
            err = exc.args[0]
            transient = err.retriable() or err.code() in (KafkaError._TIMED_OUT,
                                                          KafkaError._TRANSPORT)
            failure, error = exc, err.str()
        except TimeoutError as exc:  # no answer at all within timeout_s (a broker restarting)
            transient, failure, error = True, exc, f"no answer within {timeout_s:g} s"
        if attempt == DESCRIBE_ATTEMPTS or not transient:
            raise StartupRefused(f"{step} failed: {error}") from failure
        logger.warning("describing a topic failed; asking again", extra=log_fields(
            topic=topic, attempt=attempt, error=error))
        if pause(1.0):  # stop.wait: True once told to stop
            raise StopRequested(step) from failure
    raise AssertionError("unreachable")

