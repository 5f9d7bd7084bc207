"""Waiting for Kafka at start-up, saying what was tried.

A processor, connector or view started before its cluster is reachable (a wrong address, a
broker still starting, a network partition) must not sit silent: :func:`wait_for_kafka`
asks the bootstrap servers for cluster metadata, logs a warning naming the address, what it
asked and what failed within ``attempt_s`` seconds, and keeps asking with backoff until the
cluster answers or the process is told to stop.

:func:`keep_asking` is the one retry loop of every start-up wait (this one, and the topic and
layout checks that follow it): each failed try logged, the pause between tries cut short by
the process's stop event (SIGTERM), which ends the wait with :class:`StopRequested`.
:func:`wait_in_slices` is the one bounded wait for a single answer (an admin request's
future, a produced record's acknowledgement): waited for in slices so the stop is seen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.exceptions import kafka_error_text
from ledger_stream.logs import log_fields

logger = logging.getLogger(__name__)

ATTEMPT_S = 5.0
BACKOFF_MAX_S = 30.0
SLICE_S = 1.0  # one slice of a wait for an answer: a stop is seen between them
T = TypeVar("T")


class StopRequested(Exception):  # noqa: N818 - a request, not a failure
    """The process was told to stop (SIGTERM, SIGINT) while it waited for Kafka at start-up.
    Nothing was read or decided; the process ends with status 0."""


def keep_asking(ask: Callable[[], T], stop: threading.Event | None, warning: str, *,
                wait_s: float | None = None, backoff_max_s: float = 1.0,
                fields: dict[str, Any] | None = None) -> T:
    """``ask()``'s answer, asked again while it raises KafkaException: each failure logged
    as ``warning`` with ``fields``, the error, the attempt and the next pause (1 s, doubled
    up to ``backoff_max_s``). Re-raises the last KafkaException once ``wait_s`` has passed
    (None: never). Raises StopRequested as soon as ``stop`` is set: before a try, and
    during a pause (one try itself is bounded by the caller's timeout)."""
    deadline = float("inf") if wait_s is None else time.monotonic() + wait_s
    pause = stop.wait if stop is not None else time.sleep
    failures, delay = 0, 1.0
    while True:
        if stop is not None and stop.is_set():
            raise StopRequested(warning)
        try:
            return ask()
        except KafkaException as exc:
            failures += 1
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            logger.warning(warning, extra=log_fields(
                **(fields or {}), error=kafka_error_text(exc), attempt=failures,
                retry_in_s=delay, **({} if wait_s is None else {
                    "gives_up_in_s": round(left, 1)})))
            pause(delay)
            delay = min(delay * 2, backoff_max_s)


def wait_in_slices(done_within: Callable[[float], bool], timeout_s: float,
                   stop: threading.Event | None, step: str, slice_s: float = SLICE_S) -> bool:
    """True once ``done_within(s)`` (a wait of at most ``s`` seconds for one answer) says
    done; False once ``timeout_s`` has passed without it (at least one wait, of 0 s when
    ``timeout_s`` is 0). The bound is waited out in slices of ``slice_s`` so a start-up
    SIGTERM need not wait it all: StopRequested(``step``) once ``stop`` is set, seen before
    each slice, so within about ``slice_s`` (what was asked may still be carried out)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if stop is not None and stop.is_set():
            raise StopRequested(f"{step}: told to stop")
        if done_within(max(0.0, min(slice_s, deadline - time.monotonic()))):
            return True
        if time.monotonic() >= deadline:
            return False


def wait_for_kafka(bootstrap: str, who: str, stop: threading.Event, *,
                   attempt_s: float = ATTEMPT_S, backoff_max_s: float = BACKOFF_MAX_S) -> bool:
    """True once Kafka at ``bootstrap`` answers a metadata request; False if ``stop`` was
    set first. ``who`` names the waiting process in the log lines."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    tries = 0

    def ask() -> Any:
        nonlocal tries
        tries += 1
        return admin.list_topics(timeout=attempt_s)

    try:
        meta = keep_asking(ask, stop, "cannot reach Kafka; retrying",
                           backoff_max_s=backoff_max_s, fields={
                               "who": who, "bootstrap": bootstrap,
                               "tried": "metadata request to the bootstrap servers "
                                        f"({attempt_s:g} s)"})
    except StopRequested:
        return False
    if tries > 1:
        logger.info("reached Kafka", extra=log_fields(
            who=who, bootstrap=bootstrap, brokers=len(meta.brokers), attempts=tries))
    return True
