"""One tenant's list reads cannot starve the gateway (gateway/scans.py): with a scan behind the
routes' read function (``reads.alerts``) that blocks as an unreachable Kafka does, many
identical scans from one agent key are one read, a tenant's different scans past its bound
are a 503, another tenant's scan still starts, and a submit is answered while they all
block. The app is the real one with a real AsyncLedgerClient whose Kafka cannot be reached
(its submit's own answer: 503 within about half a second). One event loop serves every
request, as uvicorn's does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ledger_stream.config import Settings
from ledger_stream.gateway import ApiKeys, build_app, reads, scans
from ledger_stream.sdk.client import AsyncLedgerClient
from ledger_stream.serde import make_codec
from tests.gateway.support import ACME, ACME_AGENT, GLOBEX, RegisteringHub, intent

pytestmark = pytest.mark.timeout(60)


class SlowScan:
    """``reads.alerts`` blocked until released: records who scanned with which limit."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.release = threading.Event()

    def __call__(self, client: Any, tenant: str, kinds: Any, limit: int) -> list[Any]:
        self.calls.append((tenant, limit))
        self.release.wait(20)
        return []


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowScan]:
    scan = SlowScan()
    monkeypatch.setattr(reads, "alerts", scan)
    monkeypatch.setattr(scans, "WAIT_S", 0.5)
    yield scan
    scan.release.set()


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_tenants_scans_neither_starve_submits_nor_other_tenants(slow: SlowScan) -> None:
    client = AsyncLedgerClient(Settings(), bootstrap="127.0.0.1:1", codec=make_codec(None))
    client.client._hub = RegisteringHub()
    keys = ApiKeys.parse(f"acme:operator:ops-ann={ACME}\nglobex:operator:ops-eve={GLOBEX}\n"
                         f"acme:agent={ACME_AGENT}")

    with TestClient(build_app(client, keys), raise_server_exceptions=False) as tc, \
            ThreadPoolExecutor(48) as callers:
        def alerts(key: str, query: str = "") -> Any:
            return tc.get(f"/v1/alerts{query}", headers={"Authorization": f"Bearer {key}"})

        try:
            # More identical scans than any default thread pool has threads (32 at most):
            # one read.
            same = [callers.submit(alerts, ACME_AGENT) for _ in range(40)]
            until(lambda: len(slow.calls) >= 1)
            time.sleep(0.5)
            assert slow.calls == [("acme", 100)]
            other = callers.submit(alerts, ACME_AGENT, "?limit=5")
            until(lambda: len(slow.calls) >= 2)
            # A third different scan of the tenant: past its bound (2), 503 after WAIT_S.
            over = callers.submit(alerts, ACME_AGENT, "?limit=6").result(timeout=5)
            assert over.status_code == 503 and over.headers["Retry-After"] == "5", over.text
            assert "2 list reads in flight" in over.json()["detail"]
            # Another tenant's scan starts all the same.
            globex = callers.submit(alerts, GLOBEX)
            until(lambda: len(slow.calls) >= 3)

            # A submit is answered while every scan still blocks.
            submitted = callers.submit(
                tc.post, "/v1/intents", json=intent("acme/refund/inv-1", wait=0),
                headers={"Authorization": f"Bearer {ACME_AGENT}"})
            answer = submitted.result(timeout=8)
            assert not slow.release.is_set()
            # No broker: the produce is refused (503), but answered, not queued behind scans.
            assert answer.status_code == 503 and "cannot be reached" in answer.text, answer.text
        finally:
            slow.release.set()
        assert [f.result(timeout=10).status_code for f in [*same, other, globex]] == [200] * 42
    assert sorted(slow.calls) == [("acme", 5), ("acme", 100), ("globex", 100)]
