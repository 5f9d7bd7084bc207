"""The connector arm of ``ledger-stream bench`` on its own:

    python -m ledger_lab.bench.connector_throughput [--dispatches N] [--call-ms MS]

Starts its own local Kafka (1 node) and runs :mod:`ledger_lab.bench.arms.connector`: one
grant-only HTTP connector against the payments sandbox taking MS per call, N intents on
fresh keys at once, the rate from the sandbox's own records. Exits 1 if any key was paid
twice. ``ledger-stream bench --arms connector`` runs the same code.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.bench.connector_throughput",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dispatches", type=int, default=3000, metavar="N",
                        help="intents on fresh keys (default 3000)")
    parser.add_argument("--call-ms", type=int, default=20, metavar="MS",
                        help="the target's time per call (default 20)")
    parser.add_argument("--in-flight", type=int, default=None, metavar="N",
                        help="the connector's dispatches at once (default: its own, "
                        "LEDGER_CONNECTOR_MAX_IN_FLIGHT)")
    args = parser.parse_args(argv)
    if args.dispatches < 1 or args.call_ms < 0:
        parser.error("--dispatches must be at least 1 and --call-ms not negative")

    from ledger_lab.bench.arms.connector import measure
    from ledger_lab.bench.exceptions import BenchError
    from ledger_lab.local_kafka.ephemeral import kafka_for
    from ledger_stream.config import Settings

    def say(line: str) -> None:
        print(f"[connector-throughput] {line}", file=sys.stderr, flush=True)

    try:
        with kafka_for(Settings(kafka_bootstrap=None), say) as (bootstrap, _):
            figures, rss = measure(
                bootstrap, "connector-bench",
                Path(tempfile.mkdtemp(prefix="ledger-connector-bench-")), say,
                dispatches=args.dispatches, call_ms=args.call_ms, in_flight=args.in_flight)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"dispatches        {args.dispatches:,} at {args.call_ms} ms per call, grant-only")
    print(f"payments/s        {figures['payments_per_s']:,.0f} (the sandbox's own "
          f"timestamps, first to last payment: {figures['span_s']:.2f} s)")
    print(f"end to end        {figures['end_to_end_s']:.2f} s from the first intent to the "
          f"last payment")
    print(f"connector CPU     {figures['connector_cpu_us_per_dispatch']:,.0f} µs per "
          f"dispatch; peak RSS {rss:.0f} MiB")
    print("keys paid twice   0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
