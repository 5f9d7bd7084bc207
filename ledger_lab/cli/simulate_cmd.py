"""``ledger-stream simulate``: the deterministic simulation of the whole protocol.

Runs seeded schedules of agents, the processor (the real ``decide``), connectors (the real
``ConnectorCore``), a target, an operator and faults, and checks the invariants on the
target's own effects after each. Prints progress to stderr and a JSON summary to stdout;
exit status 1 when some seed breaks an invariant, with that seed and its shortened trace.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable

from ledger_stream.cli.common import CliError, count, printable


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate", help="run the deterministic protocol simulation (seeded, with faults)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # The LEDGER_SIM_* fallbacks are read when the command runs, not when its parser is
    # built: a bad one is then one line naming it, exit status 2, and `--help` still works.
    parser.add_argument("--seed", type=int, default=None,
                        help="first seed (env: LEDGER_SIM_SEED; default 0)")
    parser.add_argument("--runs", type=count(), default=None,
                        help="number of seeds to run (env: LEDGER_SIM_RUNS; default 100000)")
    parser.add_argument("--workers", type=count(least=0), default=None,
                        help="processes to use (env: LEDGER_SIM_WORKERS; default 0: every "
                        "core)")
    parser.add_argument("--replay", type=int, metavar="SEED",
                        help="run only this seed and print its whole trace")
    parser.set_defaults(handler=_run)


def _whole(text: str) -> int:
    """A whole number, any sign (a seed)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not a whole number") from None


def from_env(given: int | None, name: str, parse: Callable[[str], int], default: int) -> int:
    """The flag's value if given, else the variable ``name``'s, else ``default``; a variable
    ``parse`` refuses is a CliError naming it."""
    if given is not None:
        return given
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return parse(raw)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise CliError(f"{name}: {exc}") from None


def _run(args: argparse.Namespace) -> int:
    from ledger_lab.simulation.invariants import violations
    from ledger_lab.simulation.runner import run_many, run_one

    args.seed = from_env(args.seed, "LEDGER_SIM_SEED", _whole, 0)
    args.runs = from_env(args.runs, "LEDGER_SIM_RUNS", count(), 100_000)
    args.workers = from_env(args.workers, "LEDGER_SIM_WORKERS", count(least=0), 0)
    logging.disable(logging.WARNING)
    if args.replay is not None:
        world = run_one(args.replay)
        print("\n".join(world.trace))
        problems = violations(world)
        print(json.dumps({"seed": args.replay, "config": repr(world.cfg),
                          "violations": problems}, indent=2))
        return 1 if problems else 0
    workers = args.workers or os.cpu_count() or 1
    started = time.monotonic()

    def progress(done: int) -> None:
        print(f"[simulate] {done}/{args.runs} runs, {time.monotonic() - started:.0f} s",
              file=sys.stderr, flush=True)

    failures = list(run_many(args.seed, args.runs, workers, progress))
    for f in failures[:3]:
        print(f"seed {f.seed} breaks: {'; '.join(f.problems)}\n  config: {f.config}\n  "
              f"replay: ledger-stream simulate --replay {f.seed}\n  shortened trace:\n    "
              + "\n    ".join(f.trace), file=sys.stderr)
    summary = {"first_seed": args.seed, "runs": args.runs, "workers": workers,
               "failing_seeds": [f.seed for f in failures],
               "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(summary, indent=2))
    return 1 if failures else 0
