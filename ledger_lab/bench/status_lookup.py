"""``status(key)`` at a given number of receipts: through the receipts view, and (for
comparison) by reading the key's partition. Used by ``python -m
ledger_lab.bench.sdk_latency --status-sizes ...``.

For each size N: a topic set of its own (12 partitions), N filler receipts on distinct keys
(one shared value: the view stores bytes, it does not read them), then the measured keys'
real receipts; a ``ledger-stream view`` child process reads it all (its catch-up time is
reported), and one client asks ``status`` for the measured keys, sequentially, then from
``agents`` threads at once (ten calls per measured key, each thread's connection opened
beforehand).
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from ledger_lab.bench.processes import Child
from ledger_lab.bench.topics import end_offsets, write_records
from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka import topics
from ledger_stream.serde import AvroCodec

PARTITIONS = 12
CONCURRENT = 64


@dataclass
class Lookup:
    receipts: int
    catch_up_s: float
    view: list[float]
    view_64: list[float]
    view_64_per_s: float
    scan: list[float]
    view_rss_mb: float

    @property
    def catch_up_per_s(self) -> float:
        return self.receipts / self.catch_up_s if self.catch_up_s else 0.0


def _receipt(key: str) -> ev.Receipt:
    return ev.Receipt(receipt_id=uuid.uuid4().hex, key=key, intent_event_id=uuid.uuid4().hex,
                      status=ev.ReceiptStatus.SUCCEEDED, reason=ev.Reason.NONE,
                      args_hash="0" * 64, attempts=1, at_ms=int(time.time() * 1000),
                      external_id="re_1", key_status=ev.ReceiptStatus.SUCCEEDED)


def measure(bootstrap: str, size: int, calls: int, scan_calls: int,
            timed: Callable[[int, Callable[[int], object]], list[float]],
            say: Callable[[str], None], prefix: str | None = None,
            agents: int = CONCURRENT) -> Lookup:
    """``prefix``: the topic set's (default ``sdk-status-<size>``); ``agents`` threads in
    the concurrent part."""
    from ledger_stream import LedgerClient, operation_key

    codec = AvroCodec()
    prefix = prefix or f"sdk-status-{size}"
    s = Settings(kafka_bootstrap=bootstrap, topic_prefix=prefix, partitions=PARTITIONS,
                 replication_factor=1)
    topics.require_matching(topics.create_topics(bootstrap, s))
    filler = codec.encode(_receipt("acme/refund/filler"))
    keys = [operation_key("acme", "refund", f"measured-{i}") for i in range(calls)]
    say(f"status at {size:,} receipts: writing them")
    write_records(bootstrap, s.topic("receipts"), (
        *((f"acme/refund/f{i}".encode(), filler) for i in range(size)),
        *((k.encode(), codec.encode(_receipt(k))) for k in keys)))
    ends = sum(end_offsets(bootstrap, s.topic("receipts")).values())
    port = pick_free_ports(1)[0]
    folder = Path(tempfile.mkdtemp(prefix="ledger-view-bench-"))
    view_key = uuid.uuid4().hex  # as in production: every lookup checks a tenant API key
    view = Child(["view", "--bootstrap", bootstrap, "--topic-prefix", prefix, "--port",
                  str(port), "--state-dir", str(folder)], folder / "view.log",
                 env={"LEDGER_LOG_LEVEL": "WARNING", "LEDGER_API_KEYS": f"acme={view_key}"})
    url = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        caught_up = _wait_caught_up(url, ends, view, started + 600)
        say(f"status at {size:,} receipts: view caught up in {caught_up:.1f} s")
        with LedgerClient(s.model_copy(update={"view_url": url,
                                               "view_key": SecretStr(view_key)})) as client:
            client.status(keys[0])  # first use starts the client's clients
            viewed = timed(calls, lambda i: _check(client.status(keys[i]), keys[i]))
            total = 10 * calls
            with concurrent.futures.ThreadPoolExecutor(agents) as pool:
                list(pool.map(lambda i: client.status(keys[i % calls]), range(agents)))
                began = time.perf_counter()
                concurrent_s = list(pool.map(
                    lambda i: timed(1, lambda _: _check(client.status(keys[i % calls]),
                                                        keys[i % calls]))[0],
                    range(total)))
                rate = total / (time.perf_counter() - began)
        with LedgerClient(s) as client:
            scanned = timed(scan_calls, lambda i: _check(client.status(keys[i]), keys[i]))
        rss = _rss(view)
        return Lookup(size + calls, caught_up, viewed, concurrent_s, rate, scanned, rss)
    finally:
        view.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _check(receipt: ev.Receipt | None, key: str) -> None:
    if receipt is None or receipt.key != key:
        raise AssertionError(f"status({key}) answered {receipt}")


def _rss(child: Child) -> float:
    from ledger_lab.bench.processes import peak_rss_mb
    return peak_rss_mb(child.popen.pid)


def _wait_caught_up(url: str, ends: int, view: Child, deadline: float) -> float:
    started = time.monotonic()
    while time.monotonic() < deadline:
        if view.popen.poll() is not None:
            raise RuntimeError(f"the view exited: {view.tail()}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
                positions = json.loads(response.read())["positions"]
            if sum(positions.values()) >= ends:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("the view did not catch up within 10 minutes")
