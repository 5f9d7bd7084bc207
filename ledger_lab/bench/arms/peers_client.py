"""One peer at one concurrency, as a child process of the peers arm (so a library's
singletons, pools and threads end with it, and its RSS is its own):

    python -m ledger_lab.bench.arms.peers_client --peer NAME --url SANDBOX_URL
        --folder DIR [--dsn DSN] --agents N --calls N --token T

``agents`` threads make ``calls`` fresh payments (keys ``<token>-<i>``), then the same
``calls`` again (duplicates of settled keys). A few untimed calls first warm the store and
the connections. A call that raises is counted as an error (with the first error's text),
not retried. Prints one JSON line: latencies in ms (p50/p99, nearest rank) and effects
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
                 ) -> tuple[list[float], float, list[str]]:
    """(seconds per call that succeeded, successes per second, the errors) of
    ``call(0..calls-1)`` from ``agents`` threads. A call that raises is counted, not
    retried: what the agent got is the result."""
    def one(i: int) -> float | str:
        started = time.perf_counter()
        try:
            call(i)
        except Exception as exc:  # the peer's answer under load; reported with the figures
            return f"{type(exc).__name__}: {str(exc)[:200]}"
        return time.perf_counter() - started

    with concurrent.futures.ThreadPoolExecutor(agents) as pool:
        began = time.perf_counter()
        results = list(pool.map(one, range(calls)))
        wall = time.perf_counter() - began
    spent = [r for r in results if isinstance(r, float)]
    return spent, len(spent) / wall, [r for r in results if isinstance(r, str)]


def at(seconds: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` of ``seconds``, in ms (as the sdk arm computes it)."""
    ordered = sorted(seconds)
    return 1000 * ordered[min(len(ordered), max(math.ceil(q * len(ordered)), 1)) - 1]


def figures_of(kind: str, spent: Sequence[float], rate: float) -> dict[str, float]:
    if not spent:
        return {}
    return {f"{kind}_p50_ms": at(spent, 0.5), f"{kind}_p99_ms": at(spent, 0.99),
            f"{kind}_per_s": rate}


def measure(call: Callable[[str, dict[str, Any]], object], token: str, agents: int,
            calls: int) -> tuple[dict[str, float], dict[str, Any]]:
    """(fresh then duplicate figures, the errors) of ``call(key, body)`` (any protected
    payment). Errors: ``fresh_errors`` and ``duplicate_errors`` counts and the first one's
    text; latencies and rates count the calls that succeeded."""
    for i in range(WARM_UP_CALLS):
        call(f"{token}-warm-{i}", body(i))
        call(f"{token}-warm-{i}", body(i))

    def at_key(i: int) -> None:
        call(f"{token}-{i}", body(i))

    figures: dict[str, float] = {}
    errors: dict[str, Any] = {}
    for kind in ("fresh", "duplicate"):
        spent, rate, failed = concurrently(agents, calls, at_key)
        figures.update(figures_of(kind, spent, rate))
        if failed:
            errors[f"{kind}_errors"] = len(failed)
            errors.setdefault("first_error", failed[0])
    return figures, errors


def run(peer_name: str, url: str, folder: Path, dsn: str, agents: int, calls: int,
        token: str) -> dict[str, Any]:
    peer = open_peer(peer_name, Target(url), folder, dsn, agents)
    try:
        figures, errors = measure(peer.call, token, agents, calls)
    finally:
        peer.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {**figures, "errors": errors, "peak_rss_mb": peak_kib / 1024, "store": peer.store}


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
