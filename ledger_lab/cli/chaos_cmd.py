"""``ledger-stream chaos``: the chaos soak (ledger_lab/chaos/). Exit 1 on any violation,
printing the seed that reproduces it."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from ledger_stream.cli.common import CliError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ledger_lab.chaos.plan import FAULT_KINDS

    parser = subparsers.add_parser(
        "chaos", help="soak the whole stack under load and injected faults, then check",
        description="Start a local Kafka cluster (3 nodes: replication 3, min ISR 2), "
        "processors, connectors for the payments sandbox and PostgreSQL, and agents that "
        "submit intents through the SDK (fresh, duplicate, conflicting, replayed, "
        "unapproved). A scheduler from the seed SIGKILLs and restarts processors, "
        "connectors, agents, targets and brokers (a partition leader or the active "
        "controller), SIGSTOPs processes past their session and lease timeouts and arms "
        "target faults. Then every key must settle, and a checker compares the targets' own "
        "ledgers with the topics and the agents' journals. With --grow-by and --upgrade, "
        "an operator grows the partitions through `repartition` and rolls every processor "
        "and connector to another version, under the load. Exit 1 on any violation.")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    parser.add_argument("--rate", type=float, default=20.0, help="intents per second")
    parser.add_argument("--seed", type=int, default=0, help="the fault schedule's seed")
    parser.add_argument("--faults", type=int, default=120, help="faults to inject")
    parser.add_argument("--kinds", default=",".join(FAULT_KINDS),
                        help="comma-separated fault kinds (default: all of "
                        f"{', '.join(FAULT_KINDS)})")
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=3, help="Kafka nodes")
    parser.add_argument("--processors", type=int, default=2, help="processor processes")
    parser.add_argument("--connectors", type=int, default=2,
                        help="connector processes per target")
    parser.add_argument("--agents", type=int, default=2, help="agent processes")
    parser.add_argument("--guarantee", choices=("at-least-once", "exactly-once"),
                        default="exactly-once", help="the processors' processing guarantee")
    parser.add_argument("--settle", type=float, default=180.0,
                        help="seconds every key may take to settle after the load")
    parser.add_argument("--grow-by", type=int, default=0, metavar="N",
                        help="a growth phase: stop processors and connectors, run "
                        "`repartition --to <partitions + N>`, start them again (0: none)")
    parser.add_argument("--grow-at", type=float, default=1 / 3, metavar="FRACTION",
                        help="when the growth phase starts, as a fraction of --duration")
    parser.add_argument("--upgrade", action="store_true",
                        help="a rolling upgrade phase: every processor and connector "
                        "replaced, one at a time, by the other version (two passes)")
    parser.add_argument("--upgrade-at", type=float, default=2 / 3, metavar="FRACTION",
                        help="when the rolling upgrade starts, as a fraction of --duration")
    parser.add_argument("--partitions", type=int, default=6,
                        help="partitions of every ledger topic at the start")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the cluster, stores, logs and journals go (default: a "
                        "temporary folder, removed after a passing run)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON report")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ledger_lab.chaos.options import ChaosOptions
    from ledger_lab.chaos.plan import PlanError
    from ledger_lab.chaos.report import summary
    from ledger_lab.chaos.soak import run_soak

    for name in ("duration", "rate", "settle"):
        if getattr(args, name) <= 0:
            raise CliError(f"--{name} must be positive")
    for name in ("processors", "connectors", "agents", "partitions"):
        if getattr(args, name) < 1:
            raise CliError(f"--{name} must be at least 1")
    if args.faults < 0:
        raise CliError("--faults must not be negative")
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    options = ChaosOptions(duration_s=args.duration, rate=args.rate, seed=args.seed,
                           faults=args.faults, kinds=kinds, nodes=args.nodes,
                           processors=args.processors, connectors=args.connectors,
                           agents=args.agents, guarantee=args.guarantee, settle_s=args.settle,
                           partitions=args.partitions, grow_by=args.grow_by,
                           grow_at=args.grow_at, upgrade=args.upgrade,
                           upgrade_at=args.upgrade_at)
    keep = args.workdir is not None
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ledger-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        print(f"[chaos] {line}", file=sys.stderr, flush=True)

    try:
        result = run_soak(options, workdir, say)
    except PlanError as exc:
        raise CliError(str(exc)) from exc
    report = result.as_dict()
    report["workdir"] = str(workdir)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2) if args.json else summary(report))
    if result.ok and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not result.ok:
        say(f"logs, stores and journals kept in {workdir}")
    return 0 if result.ok else 1
