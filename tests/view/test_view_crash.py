"""The view as a process, SIGKILLed while it reads a stream of records and started again on
the same store: every key's timeline and latest receipt then equal what reading the topics
gives (rows and positions are written together, so a crash loses or repeats nothing)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from ledger_lab.harness.processes import Proc
from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream import LedgerClient
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(120)

KEYS = [f"acme/refund/k{i}" for i in range(40)]


def _records(settings: Settings, rounds: int, stop: threading.Event) -> None:
    """Receipts and alerts for every key, round after round, until ``stop``."""
    assert settings.kafka_bootstrap
    producer = EventProducer(settings, settings.kafka_bootstrap, AvroCodec())
    for n in range(rounds):
        if stop.is_set():
            break
        for key in KEYS:
            producer.send("receipts", ev.Receipt(
                uuid.uuid4().hex, key, f"i{n}", ev.ReceiptStatus.IN_PROGRESS, ev.Reason.NONE,
                "h" * 64, n + 1, 1_796_000_000_000 + n, key_status=ev.ReceiptStatus.IN_PROGRESS))
            producer.send("alerts", ev.Alert(uuid.uuid4().hex, key, ev.AlertKind.STALLED,
                                             f"s{n}", f"round {n}", 1_796_000_000_000 + n))
        producer.flush()
        time.sleep(0.02)
    producer.close()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def _view(settings: Settings, state: Path, port: int, log: Path) -> Proc:
    assert settings.kafka_bootstrap
    proc = Proc(["view", "--port", str(port), "--state-dir", str(state), "--bootstrap",
                 settings.kafka_bootstrap, "--topic-prefix", settings.topic_prefix,
                 "--no-auth"], log)
    deadline = time.monotonic() + 30
    while True:
        try:
            _get(f"http://127.0.0.1:{port}/healthz")
            return proc
        except OSError:
            assert proc.alive() and time.monotonic() < deadline, proc.tail()
            time.sleep(0.1)


def test_a_view_killed_mid_stream_resumes_with_exactly_the_topics_records(
        ledger_topics: Settings, tmp_path: Path) -> None:
    s = ledger_topics
    (port,) = pick_free_ports(1)
    url = f"http://127.0.0.1:{port}"
    stop = threading.Event()
    writer = threading.Thread(target=_records, args=(s, 60, stop), daemon=True)
    first = _view(s, tmp_path / "state", port, tmp_path / "view-1.log")
    try:
        writer.start()
        while sum(_get(f"{url}/healthz")["positions"].values()) < 300:  # mid-stream
            time.sleep(0.05)
    finally:
        first.kill()  # SIGKILL, between or inside its writes
    writer.join(60)
    assert not writer.is_alive()

    again = _view(s, tmp_path / "state", port, tmp_path / "view-2.log")
    try:
        with LedgerClient(s) as topics:  # no view: reads the key's partitions
            for key in KEYS[::4]:
                path = quote(key, safe="")
                body = _get(f"{url}/v1/timeline/{path}?wait_ms=20000&limit=100000")
                assert body["caught_up"], body["positions"]
                scanned = [row.as_dict() for row in topics.timeline(key, limit=100_000)]
                assert body["rows"] == scanned, key
                assert len(scanned) == 2 * 60  # every receipt and alert, once
                latest = _get(f"{url}/v1/operations/{path}")["receipt"]
                assert latest["intent_event_id"] == "i59"
    finally:
        stop.set()
        assert again.stop() == 0, again.tail()
