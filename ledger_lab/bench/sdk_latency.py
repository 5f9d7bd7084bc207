"""The SDK arm of ``ledger-stream bench`` on its own:

    python -m ledger_lab.bench.sdk_latency [--calls N] [--status-sizes N,N,...]
                                              [--guarantee at-least-once]

Starts its own local Kafka (1 node) and runs :mod:`ledger_lab.bench.arms.sdk` (a
processor, the payments sandbox and its HTTP connector, one client; sequential calls and 64
agents), then prints every figure. ``ledger-stream bench --arms sdk`` runs the same code.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.bench.sdk_latency",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, metavar="N",
                        help="sequential calls per operation (fresh submits and status: N/4, "
                        "at least 20; default 200)")
    parser.add_argument("--agents", type=int, default=64, metavar="N",
                        help="threads sharing the client in the concurrent part (default 64)")
    parser.add_argument("--call-ms", type=int, default=20, metavar="MS",
                        help="the sandbox's time per call (default 20)")
    parser.add_argument("--status-sizes", default="0,200000,2000000", metavar="N,N,...",
                        help="receipts in the topic when status is measured through the "
                        "receipts view (and by reading the partition, 10 calls); empty to "
                        "skip (default 0,200000,2000000)")
    parser.add_argument("--guarantee", choices=("exactly-once", "at-least-once"),
                        default="exactly-once",
                        help="the processor's processing guarantee (default exactly-once, "
                        "as the benchmark runs it)")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.agents < 1 or args.call_ms < 0:
        parser.error("--calls and --agents must be at least 1, --call-ms not negative")
    try:
        sizes = [int(n) for n in args.status_sizes.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--status-sizes must be integers separated by commas, got "
                     f"{args.status_sizes!r}")
    if any(n < 0 for n in sizes):
        parser.error("--status-sizes must not be negative")

    from ledger_lab.bench.arms.sdk import measure
    from ledger_lab.local_kafka.ephemeral import kafka_for
    from ledger_stream.config import Settings

    def say(line: str) -> None:
        print(f"[sdk-latency] {line}", file=sys.stderr, flush=True)

    with kafka_for(Settings(kafka_bootstrap=None), say) as (bootstrap, _):
        figures, rss = measure(bootstrap, "sdk-latency",
                               Path(tempfile.mkdtemp(prefix="ledger-sdk-latency-")), say,
                               calls=args.calls, agents=args.agents, call_ms=args.call_ms,
                               status_sizes=sizes, guarantee=args.guarantee)
    for name, value in figures.items():
        print(f"{name:<36} {value:>12,.1f}")
    print(f"{'peak RSS (MiB)':<36} {rss:>12,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
