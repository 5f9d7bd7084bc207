"""One peer at one concurrency, as a child process of the peers arm (so a library's
singletons, pools and threads end with it, and its RSS is its own):

    python -m ledger_lab.bench.arms.peers_client --peer NAME --url SANDBOX_URL
        --folder DIR [--dsn DSN] --agents N --calls N --token T

``agents`` threads make ``calls`` fresh payments (keys ``<token>-<i>``), then the same
``calls`` again (duplicates of settled keys). A few untimed calls first warm the store and
the connections. Prints one JSON line: latencies in ms (p50/p99, nearest rank) and effects
per second over the wall time of each batch.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ledger_lab.bench.arms.peers_libs import PEER_NAMES, Target, open_peer

WARM_UP_CALLS = 3


def body(i: int) -> dict[str, Any]:
    """The payment: the same shape for every peer and for ledger-stream."""
    return {"amount": 1000 + i % 97, "currency": "EUR"}


def concurrently(agents: int, calls: int, call: Callable[[int], object]
                 ) -> tuple[list[float], float]:
    """(seconds per call, calls per second) of ``call(0..calls-1)`` from ``agents`` threads."""
    def one(i: int) -> float:
        started = time.perf_counter()
        call(i)
        return time.perf_counter() - started

    with concurrent.futures.ThreadPoolExecutor(agents) as pool:
        began = time.perf_counter()
        spent = list(pool.map(one, range(calls)))
        return spent, calls / (time.perf_counter() - began)


def at(seconds: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` of ``seconds``, in ms (as the sdk arm computes it)."""
    ordered = sorted(seconds)
    return 1000 * ordered[min(len(ordered), max(math.ceil(q * len(ordered)), 1)) - 1]


def figures_of(kind: str, spent: Sequence[float], rate: float) -> dict[str, float]:
    return {f"{kind}_p50_ms": at(spent, 0.5), f"{kind}_p99_ms": at(spent, 0.99),
            f"{kind}_per_s": rate}


def measure(call: Callable[[str, dict[str, Any]], object], token: str, agents: int,
            calls: int) -> dict[str, float]:
    """Fresh then duplicate figures of ``call(key, body)`` (any protected payment)."""
    for i in range(WARM_UP_CALLS):
        call(f"{token}-warm-{i}", body(i))
        call(f"{token}-warm-{i}", body(i))

    def at_key(i: int) -> None:
        call(f"{token}-{i}", body(i))

    fresh = figures_of("fresh", *concurrently(agents, calls, at_key))
    duplicate = figures_of("duplicate", *concurrently(agents, calls, at_key))
    return {**fresh, **duplicate}


def run(peer_name: str, url: str, folder: Path, dsn: str, agents: int, calls: int,
        token: str) -> dict[str, Any]:
    peer = open_peer(peer_name, Target(url), folder, dsn, agents)
    try:
        figures = measure(peer.call, token, agents, calls)
    finally:
        peer.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {**figures, "peak_rss_mb": peak_kib / 1024, "store": peer.store}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one peer of the peers arm")
    parser.add_argument("--peer", choices=PEER_NAMES, required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--dsn", default="")
    parser.add_argument("--agents", type=int, required=True)
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--token", required=True)
    a = parser.parse_args(argv)
    print(json.dumps(run(a.peer, a.url, a.folder, a.dsn, a.agents, a.calls, a.token)))


if __name__ == "__main__":
    main()
