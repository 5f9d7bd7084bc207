"""An idle client's receipts consumer on the real broker: it waits in the broker for
records instead of asking again every few ms. At a 10 ms fetch wait an idle client sent
~100 fetch requests a second (its largest CPU cost per effect for one agent)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest

import ledger_stream.sdk.receipt_hub as receipt_hub
from ledger_stream import LedgerClient
from ledger_stream.config import Settings

pytestmark = pytest.mark.timeout(120)


def test_an_idle_receipts_consumer_asks_the_broker_a_few_times_a_second(
        ledger_topics: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    fetches: list[tuple[float, int]] = []  # (when, Fetch requests sent so far)
    seen = threading.Event()
    real = receipt_hub.Consumer

    def counted(config: dict[str, Any]) -> Any:
        def stats(raw: str) -> None:
            brokers = json.loads(raw)["brokers"].values()
            fetches.append((time.monotonic(), sum(b["req"].get("Fetch", 0) for b in brokers)))
            seen.set()
        return real({**config, "statistics.interval.ms": 500, "stats_cb": stats})

    monkeypatch.setattr(receipt_hub, "Consumer", counted)
    with LedgerClient(ledger_topics) as client:
        hub = client.receipts()
        hub.follow(f"acme/refund/{uuid.uuid4().hex[:8]}").close()  # a partition is read
        assert seen.wait(30), "no statistics from the receipts consumer"
        time.sleep(3.2)  # idle: nothing is produced
    (t0, n0), (t1, n1) = fetches[1], fetches[-1]  # from the second report: assigned by then
    assert t1 - t0 >= 2.0
    per_s = (n1 - n0) / (t1 - t0)
    assert per_s <= 25, f"{per_s:.0f} fetch requests a second from an idle client"
