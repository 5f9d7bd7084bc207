"""Entry point of the ``ledger-lab`` command: the lab's commands alone.

The same commands are on ``ledger-stream`` (through the ``ledger_stream.commands`` entry
points); this one works from a source tree whose entry points were never installed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ledger_lab.cli import (
    bench_cmd,
    chaos_cmd,
    demo_cmd,
    falsify_cmd,
    fuzz_cmd,
    kafka_cmd,
    sandbox_cmd,
    simulate_cmd,
)
from ledger_stream.cli.main import Command, add_version_flags, package_version, run

LAB_COMMANDS: tuple[Command, ...] = (
    kafka_cmd, sandbox_cmd, demo_cmd, falsify_cmd, bench_cmd, simulate_cmd, fuzz_cmd,
    chaos_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ledger-lab",
        description="The lab around ledger-stream: local Kafka, sandbox, demo, benchmarks, "
        "falsification, simulation, fuzzing and chaos.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in LAB_COMMANDS:
        command.register(subparsers)
    add_version_flags(parser, f"ledger-lab {package_version()}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
