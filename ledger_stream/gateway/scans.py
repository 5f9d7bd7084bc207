"""The gateway's list reads that scan a whole topic (``GET /v1/alerts``, ``/v1/reconciliation``,
``/v1/approvals``, ``/v1/freezes``): each reads its topics to their end, and takes Kafka's
timeouts (10 s and more) when the brokers cannot be reached. So that one tenant's key cannot
starve the others, or anyone's submits:

- they run on SCAN_THREADS threads of their own, never on the pool the submit path's blocking
  calls share (``asyncio.to_thread``): no number of scans delays a ``POST /v1/intents``;
- identical scans in flight at once (one tenant, one route, the same parameters) are one
  read, whose answer (or error) each of them gets;
- a tenant has at most TENANT_SCANS different scans in flight: another waits for one of them
  to end, at most WAIT_S seconds, then is answered 503 with ``Retry-After``.

Loop-agnostic (a lock and concurrent futures): scans started from one event loop may be
joined from another.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from fastapi import HTTPException

T = TypeVar("T")

SCAN_THREADS = 4  # for every tenant's scans
TENANT_SCANS = 2  # different scans of one tenant in flight at once: half the threads
WAIT_S = 5.0  # how long a scan past its tenant's bound waits for a turn
_LOOK_S = 0.05  # how often a waiting scan looks again


class Scans:
    """The scan threads, the scans in flight by (tenant, flight) and per tenant."""

    def __init__(self, threads: int = SCAN_THREADS) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="gateway-scan")
        self._lock = threading.Lock()
        self._flights: dict[tuple[str, Hashable], Future[Any]] = {}
        self._running: dict[str, int] = {}

    async def run(self, tenant: str, flight: Hashable, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` for ``tenant`` on the scan threads, or the answer of the identical
        scan in flight (``flight`` names the route and its parameters). 503 when the tenant's
        bound leaves no turn within WAIT_S."""
        deadline = time.monotonic() + WAIT_S
        while (future := self._join_or_start(tenant, flight, fn, args)) is None:
            if time.monotonic() >= deadline:
                raise HTTPException(503, f"this tenant has {TENANT_SCANS} list reads in "
                                    "flight (each reads a whole topic): retry in a few "
                                    "seconds", headers={"Retry-After": "5"})
            await asyncio.sleep(_LOOK_S)
        # Shielded: a caller that goes away must not cancel the scan the others wait for.
        return await asyncio.shield(asyncio.wrap_future(future))

    def _join_or_start(self, tenant: str, flight: Hashable, fn: Callable[..., T],
                       args: tuple[Any, ...]) -> Future[T] | None:
        """The scan in flight, a new one, or None when the tenant is at its bound."""
        key = (tenant, flight)
        with self._lock:
            future = self._flights.get(key)
            if future is not None:
                return future
            if self._running.get(tenant, 0) >= TENANT_SCANS:
                return None
            future = self._pool.submit(fn, *args)
            self._flights[key] = future
            self._running[tenant] = self._running.get(tenant, 0) + 1
        future.add_done_callback(lambda _: self._ended(key))
        return future

    def _ended(self, key: tuple[str, Hashable]) -> None:
        with self._lock:
            del self._flights[key]
            left = self._running[key[0]] - 1
            if left:
                self._running[key[0]] = left
            else:
                del self._running[key[0]]
