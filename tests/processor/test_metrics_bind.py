"""Metrics listeners bind to loopback unless told otherwise: the processor as a process on
the real broker (its /metrics refused on this host's other address, served on loopback),
opened by ``--metrics-host``; ``serve_metrics`` (the connectors' too) binds 127.0.0.1 by
default."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.processor.metrics import serve_metrics
from tests.addresses import outward_address
from tests.processor.support import served_metrics_port

pytestmark = pytest.mark.timeout(120)



def reachable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(5)
        return probe.connect_ex((host, port)) == 0


def test_the_default_metrics_address_is_loopback() -> None:
    assert Settings().metrics_host == "127.0.0.1"
    bound = serve_metrics(0, "test")
    assert bound is not None and bound[0] == "127.0.0.1"
    assert reachable("127.0.0.1", bound[1])
    assert not reachable(outward_address(), bound[1])
    opened = serve_metrics(0, "test", "0.0.0.0")
    assert opened is not None and reachable(outward_address(), opened[1])


@pytest.mark.parametrize("opened", [False, True])
def test_the_processors_metrics_open_only_with_the_flag(ledger_topics: Settings,
                                                        tmp_path: Path, opened: bool) -> None:
    outward = outward_address()
    extra = ("--metrics-host", "0.0.0.0") if opened else ()
    proc = start_processor(ledger_topics, tmp_path / "state", tmp_path / "processor.log",
                           *extra, metrics_port=0)
    try:
        port = served_metrics_port(proc)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as local:
            assert b"ledger_" in local.read()
        assert reachable(outward, port) == opened
    finally:
        assert proc.stop() == 0, proc.tail()
