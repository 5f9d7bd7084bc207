"""Unreachable Kafka is said, not silent: the processor, a connector and the SDK name the
address and what failed within seconds; the processes keep asking until told to stop, and
librdkafka's own lines come out as structured log lines, folded when they repeat."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger_stream import LedgerClient, LedgerUnavailable, Workflow
from ledger_stream.config import Settings
from ledger_stream.kafka.clientlog import FoldRepeats
from ledger_stream.kafka.reach import wait_for_kafka

pytestmark = pytest.mark.timeout(120)


def closed_port() -> str:
    """An address nothing listens at."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def librdkafka_line(text: str) -> logging.LogRecord:
    return logging.LogRecord("librdkafka", logging.ERROR, "", 0, "%s [%s] %s",
                             ("FAIL", "rdkafka#consumer-1", text), None)


def test_repeated_librdkafka_lines_are_folded_and_counted():
    now = [0.0]
    fold = FoldRepeats(window_s=30.0, clock=lambda: now[0])
    first = librdkafka_line("Connect to ipv4#127.0.0.1:1 failed (after 0ms in state CONNECT)")
    assert fold.filter(first)
    assert first.getMessage().startswith("Connect to")
    assert first.fields == {"facility": "FAIL", "client": "rdkafka#consumer-1"}  # type: ignore[attr-defined]
    for ms in (1, 52, 104):  # the same line, numbers aside
        now[0] += 1
        assert not fold.filter(librdkafka_line(
            f"Connect to ipv4#127.0.0.1:1 failed (after {ms}ms in state CONNECT)"))
    assert fold.filter(librdkafka_line("another line"))
    assert fold.filter(librdkafka_line(  # another broker is another line, not a repeat
        "Connect to ipv4#10.0.0.2:9092 failed (after 0ms in state CONNECT)"))
    now[0] += 30
    again = librdkafka_line("Connect to ipv4#127.0.0.1:1 failed (after 0ms in state CONNECT)")
    assert fold.filter(again)
    assert again.fields["repeated"] == 3  # type: ignore[attr-defined]


def test_wait_for_kafka_says_what_failed_then_keeps_asking_until_stopped(
        caplog: pytest.LogCaptureFixture):
    address, stop = closed_port(), threading.Event()
    result: list[bool] = []
    caplog.set_level(logging.WARNING, logger="ledger_stream.kafka.reach")
    waiter = threading.Thread(target=lambda: result.append(
        wait_for_kafka(address, "test", stop, attempt_s=1.0)))
    started = time.monotonic()
    waiter.start()
    while len([r for r in caplog.records if r.name == "ledger_stream.kafka.reach"]) < 2:
        assert time.monotonic() - started < 20, "no second warning"
        time.sleep(0.1)
    first = next(r for r in caplog.records if r.name == "ledger_stream.kafka.reach")
    assert first.getMessage() == "cannot reach Kafka; retrying"
    assert first.fields["bootstrap"] == address  # type: ignore[attr-defined]
    assert "metadata request" in first.fields["tried"]  # type: ignore[attr-defined]
    assert first.fields["error"]  # type: ignore[attr-defined]
    stop.set()
    waiter.join(10)
    assert result == [False]


def test_wait_for_kafka_returns_once_the_cluster_answers(kafka_bootstrap: str):
    assert wait_for_kafka(kafka_bootstrap, "test", threading.Event())


@pytest.mark.parametrize("command", [
    ["processor", "--metrics-port", "off"],
    ["connector", "http", "--name", "payments", "--base-url", "http://127.0.0.1:9"],
], ids=["processor", "connector"])
def test_a_process_without_kafka_says_so_keeps_trying_and_stops_on_sigterm(
        command: list[str], tmp_path: Path):
    address = closed_port()
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ledger_stream.cli.main", *command, "--bootstrap", address,
             "--home", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=err,
            env={**os.environ, "LEDGER_DEV_MODE": "1", "LEDGER_KAFKA_TIMEOUT_S": "1"})
    try:
        deadline = time.monotonic() + 20
        warnings: list[dict[str, object]] = []
        while len(warnings) < 2:  # the first within seconds, and it keeps asking
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
            lines = [json.loads(line) for line in log.read_text().splitlines()
                     if line.startswith("{")]
            warnings = [x for x in lines if x["msg"] == "cannot reach Kafka; retrying"]
        assert warnings[0]["bootstrap"] == address
        text = log.read_text()
        assert not [line for line in text.splitlines() if not line.startswith("{")], text
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    assert code == 0, log.read_text()


def test_the_sdk_raises_ledger_unavailable_naming_the_cluster():
    address = closed_port()
    client = LedgerClient(Settings(kafka_timeout_s=1), bootstrap=address)
    intent = client.intent("acme/refund/inv-1", "refund", "payments", {"amount": 1},
                           workflow=Workflow("g", "1"))
    started = time.monotonic()
    with pytest.raises(LedgerUnavailable) as raised:
        client.submit(intent, wait=30)
    assert time.monotonic() - started < 10  # LEDGER_KAFKA_TIMEOUT_S, not the produce timeout
    assert address in str(raised.value)
    assert isinstance(raised.value, ConnectionError)


SSL = '{"security.protocol": "SSL"}'  # the test broker speaks PLAINTEXT: TLS cannot reach it


def test_the_clusters_security_settings_reach_the_processors_clients(
        kafka_bootstrap: str, tmp_path: Path):
    """``kafka_client`` (LEDGER_KAFKA_CLIENT) is applied to every client: with TLS asked of a
    PLAINTEXT broker, the processor that reaches it without the setting cannot."""
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ledger_stream.cli.main", "processor", "--metrics-port",
             "off", "--bootstrap", kafka_bootstrap, "--home", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=err,
            env={**os.environ, "LEDGER_DEV_MODE": "1", "LEDGER_KAFKA_CLIENT": SSL,
                 "LEDGER_KAFKA_TIMEOUT_S": "1"})
    try:
        deadline = time.monotonic() + 20
        while "cannot reach Kafka" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()


def test_the_sdk_uses_the_clusters_security_settings(kafka_bootstrap: str):
    from ledger_stream.kafka.client_config import use_client_settings

    try:
        client = LedgerClient(Settings(kafka_client=json.loads(SSL), kafka_timeout_s=1),
                              bootstrap=kafka_bootstrap)
        intent = client.intent("acme/refund/inv-1", "refund", "payments", {"amount": 1},
                               workflow=Workflow("g", "1"))
        with pytest.raises(LedgerUnavailable):
            client.submit(intent, wait=30)
    finally:
        use_client_settings({})  # this test process's other clients speak PLAINTEXT


def test_a_reserved_client_property_is_refused(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch):
    from ledger_stream.cli.main import main

    for alias in ("partitioner", "topic.partitioner", "Topic.Auto.Offset.Reset",
                  "metadata.broker.list", "request.required.acks"):
        monkeypatch.setenv("LEDGER_KAFKA_CLIENT", json.dumps({alias: "x"}))
        assert main(["alerts", "--bootstrap", "127.0.0.1:9"]) == 2, alias
        assert f"may not set {alias}" in capsys.readouterr().err
