"""Waiting for local brokers to answer, by asking them (never by sleeping a fixed time)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from ledger_lab.local_kafka.ports import can_connect

POLL_INTERVAL_S = 0.2
# librdkafka logs every refused connection; the probe's failures are expected, keep them quiet.
_quiet = logging.getLogger("ledger_lab.local_kafka.probe")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def wait_until_answering(
    bootstrap: str,
    broker_ports: list[int],
    timeout_s: float,
    check_processes: Callable[[], None],
    client: Mapping[str, str] | None = None,
) -> float:
    """Block until every broker accepts TCP and the cluster's metadata lists all of them.

    ``check_processes`` runs on every poll and raises when a broker process died, so a
    crash is reported at once instead of at the timeout. ``client``: the connection's
    properties (SASL) for a cluster that authenticates. Returns the seconds waited;
    raises TimeoutError (the caller adds the log tail) when ``timeout_s`` passes.
    """
    from confluent_kafka import KafkaException  # here: `ledger-stream kafka --help` needs none
    from confluent_kafka.admin import AdminClient

    started = time.monotonic()
    deadline = started + timeout_s
    while not all(can_connect(port) for port in broker_ports):
        check_processes()
        _sleep_until_next_poll(deadline, "accept connections")
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _quiet, **(client or {})}
    admin = AdminClient(conf)
    while True:
        check_processes()
        remaining = deadline - time.monotonic()
        try:
            metadata = admin.list_topics(timeout=max(0.5, min(5.0, remaining)))
            if len(metadata.brokers) >= len(broker_ports):
                return time.monotonic() - started
        except KafkaException:
            pass  # not answering yet
        _sleep_until_next_poll(deadline, "answer metadata requests")


def _sleep_until_next_poll(deadline: float, what: str) -> None:
    if time.monotonic() >= deadline:
        raise TimeoutError(f"the brokers did not {what} in time")
    time.sleep(POLL_INTERVAL_S)
