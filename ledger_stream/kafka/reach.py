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
:func:`admin_answer` is that wait for a request librdkafka sends to the cluster's
"controller", which asks for metadata between slices so a dead broker is not waited on.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
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
REDRAW_S = 0.5  # bound of the metadata request between two slices of an admin answer
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


def admin_answer(admin: AdminClient, future: Future[T], timeout_s: float,
                 stop: threading.Event | None, step: str) -> T:
    """The answer of an admin request librdkafka routes to the cluster's "controller"
    (DescribeConfigs and IncrementalAlterConfigs of a topic or a group): raises the error
    the request met, TimeoutError past ``timeout_s``, StopRequested once ``stop`` is set
    (seen about every ``SLICE_S`` + ``REDRAW_S``; the request may still be carried out).

    Why the metadata is asked for between slices: librdkafka sends such a request to the
    controller id of the last metadata answer and, while that broker is down, waits for it
    to come back (it asks for metadata again only when it knows no controller at all). On
    KRaft that id is a random live broker drawn by the answering broker, and a broker killed
    moments ago still counts as live until its session times out, so a client that started
    then could wait on a dead broker for the whole bound, and for every try after it (the
    chaos soak: 110 s). A metadata answer that names another controller wakes the waiting
    request, which then goes to that broker."""
    answer: list[T] = []

    def within(slice_s: float) -> bool:
        try:
            answer.append(future.result(slice_s))  # an error the request met is raised
        except TimeoutError:
            if slice_s < SLICE_S:  # the bound's last slice: its TimeoutError is the bound's
                raise
            _redraw_controller(admin)
            return False
        return True

    if not wait_in_slices(within, timeout_s, stop, step):
        raise TimeoutError(f"{step}: no answer within {timeout_s:g} s")
    return answer[0]


def _redraw_controller(admin: AdminClient) -> None:
    """Ask for the cluster's metadata, whose answer carries a controller id drawn anew. No
    answer within ``REDRAW_S`` is no harm: the request still updates the client when it is
    answered, and the admin request's own bound stands."""
    with contextlib.suppress(KafkaException):
        admin.list_topics(timeout=REDRAW_S)


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
