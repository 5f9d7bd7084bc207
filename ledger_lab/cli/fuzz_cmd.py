"""``ledger-stream fuzz``: hostile records through the codec and the processor's input path,
without a broker (ledger_lab/fuzz/seeded.py). Exit 1 on any violation, printing the
seed and case that reproduce it."""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from ledger_stream.cli.common import CliError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "fuzz", help="fuzz the codec and the processor's input path",
        description="Random and mutated Avro records (wrong fingerprints, oversized fields, "
        "null and foreign keys, wrong partitions, missing and forged approvals) through the "
        "codec and the processor's decide step on in-memory stores. Every case must end in "
        "an event or a DecodeError, a poison record must give exactly a DLQ record and an "
        "alert and change no key, and no refused approval may be dispatched. Exit 1 on a "
        "violation; the seed and case number reproduce it.")
    parser.add_argument("--cases", type=int, default=1_000_000, help="records to try")
    parser.add_argument("--seed", type=int, default=1, help="the run's seed")
    parser.add_argument("--json", action="store_true", help="the report as JSON")
    parser.add_argument(
        "--engine", choices=("seeded", "atheris"), default="seeded",
        help="seeded: the generator of shapes we thought of (default); atheris: "
        "coverage-guided (libFuzzer) from a corpus of valid records, same promises")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="atheris: the corpus folder (default: a temporary one, seeded "
                        "with valid records); a found input is written to the current folder")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ledger_lab.fuzz.seeded import FuzzReport, run_fuzz

    if args.cases < 1:
        raise CliError("--cases must be at least 1")
    if args.engine == "atheris":
        return _atheris(args)
    # The fuzzed freezes and decisions would log a line each: only warnings and worse.
    logging.getLogger("ledger_stream.processor").setLevel(logging.WARNING)

    def progress(report: FuzzReport) -> None:
        print(f"{report.cases} cases, {report.violation_count} violations, "
              f"{report.seconds:.0f} s", file=sys.stderr, flush=True)

    report = run_fuzz(args.cases, args.seed, progress=progress)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        figures = report.as_dict()
        print(f"{figures['cases']} cases in {figures['seconds']} s "
              f"({figures['cases_per_second']}/s): {figures['kinds']}")
        print(f"violations: {report.violation_count}")
        for line in report.violations:
            print(f"  {line}")
    return 1 if report.violation_count else 0


def _atheris(args: argparse.Namespace) -> int:
    """libFuzzer runs in a process of its own (it exits when done or on a finding)."""
    import importlib.util

    if importlib.util.find_spec("atheris") is None:
        raise CliError("the atheris engine needs the atheris package (pip install atheris; "
                       "x86-64 Linux wheels), installed with the dev extra")
    with tempfile.TemporaryDirectory(prefix="ledger-fuzz-corpus-") as tmp:
        corpus = args.corpus or Path(tmp)
        command = [sys.executable, "-m", "ledger_lab.fuzz.coverage",
                   f"-runs={args.cases}", f"-seed={args.seed}", "-print_final_stats=1",
                   str(corpus)]
        return subprocess.run(command, check=False).returncode
