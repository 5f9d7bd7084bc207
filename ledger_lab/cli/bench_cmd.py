"""``ledger-stream bench``: decisions/s and latency against raw Kafka and PostgreSQL."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ledger_stream.cli.common import CliError, add_common_flags, settings_from
from ledger_stream.kafka.exceptions import KafkaSetupError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ledger_lab.bench.arm_names import ARM_NAMES

    parser = subparsers.add_parser(
        "bench",
        help="benchmark the ledger against raw Kafka echoes and a PostgreSQL claim loop",
        description="Run every arm against one broker and one pre-generated Avro workload, "
        "interleaved and repeated; print a table of figures and ratios and write JSON. "
        "Starts its own local Kafka (stopped at the end) unless --bootstrap or "
        "LEDGER_KAFKA_BOOTSTRAP names one; the PostgreSQL arms start a throwaway server "
        "from /usr/lib/postgresql. A default run takes several minutes; --smoke seconds.",
    )
    parser.add_argument("--intents", type=int, metavar="N",
                        help="intents in the shared workload (env: LEDGER_BENCH_INTENTS; "
                        "default 200000)")
    parser.add_argument("--keys", type=int, metavar="N",
                        help="distinct operation keys; the other intents repeat a key, split "
                        "by the two shares (env: LEDGER_BENCH_KEYS; default intents x "
                        "(1 - duplicate share - conflict share))")
    parser.add_argument("--duplicate-share", type=float, metavar="F",
                        help="share of intents that repeat a key with the same arguments "
                        "(env: LEDGER_BENCH_DUPLICATE_SHARE; default 0.10)")
    parser.add_argument("--conflict-share", type=float, metavar="F",
                        help="share of intents that reuse a key with different arguments "
                        "(env: LEDGER_BENCH_CONFLICT_SHARE; default 0.02)")
    parser.add_argument("--partitions", type=int, metavar="N",
                        help="partitions of every benchmark topic (env: "
                        "LEDGER_BENCH_PARTITIONS; default 12)")
    parser.add_argument("--mode", choices=("at-least-once", "exactly-once", "both"),
                        help="processing guarantee(s) of the ledger arm (env: "
                        "LEDGER_BENCH_MODE; default both)")
    parser.add_argument("--arms", metavar="A,B,...",
                        help=f"arms to run, comma-separated, from {', '.join(ARM_NAMES)} "
                        "(env: LEDGER_BENCH_ARMS; default all)")
    parser.add_argument("--repeat", type=int, metavar="N",
                        help="repetitions of the interleaved throughput arms (env: "
                        "LEDGER_BENCH_REPEAT; default 3)")
    parser.add_argument("--latency-rate", type=float, metavar="N",
                        help="intents per second of the latency arm (env: "
                        "LEDGER_BENCH_LATENCY_RATE; default half the ledger's throughput)")
    parser.add_argument("--seed", type=int, metavar="N",
                        help="workload seed (env: LEDGER_BENCH_SEED; default 1)")
    parser.add_argument("--out", metavar="FILE",
                        help="write the JSON report here (env: LEDGER_BENCH_OUT; default: "
                        "stdout only)")
    parser.add_argument("--smoke", action="store_true", default=None,
                        help="tiny sizes, one repetition: checks that every arm runs "
                        "(env: LEDGER_BENCH_SMOKE)")
    parser.add_argument("--cpu", action="store_true",
                        help="no Kafka: the CPU harness, µs per record of each processor stage "
                        "and of the echo and io-floor work (--intents default 10000, --repeat "
                        "passes default 5, --partitions, --seed, --out)")
    parser.add_argument("--charts", nargs="?", const="", metavar="DIR",
                        help="draw the results as PNG charts (latency CDF, stage bars, peers; "
                        "needs the charts extra) into DIR, or beside the --out JSON")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _draw(report: dict[str, object], folder: str, out: str | None) -> None:
    """The report's charts into ``folder`` (empty: beside ``out``), named after ``out``."""
    from ledger_lab.bench.charts import ChartsUnavailable, render

    where = Path(folder) if folder else Path(out).parent if out else Path(".")
    try:
        written = render(report, where, Path(out).stem if out else "bench")
    except ChartsUnavailable as exc:
        raise CliError(str(exc)) from exc
    for path in written:
        print(f"chart: {path}")


def _run_cpu(args: argparse.Namespace) -> int:
    from ledger_lab.bench import cpu

    out, charts = args.out, getattr(args, "charts", None)
    if charts is not None and not out:  # the charts are drawn from the JSON
        Path(charts or ".").mkdir(parents=True, exist_ok=True)
        out = str(Path(charts or ".") / "cpu.json")
    argv = [f"--{name}={value}" for name, value in (
        ("intents", args.intents), ("partitions", args.partitions), ("passes", args.repeat),
        ("seed", args.seed), ("out", out)) if value is not None]
    code = cpu.main(argv)
    if code == 0 and charts is not None and out:
        _draw(json.loads(Path(out).read_text()), charts, out)
    return code


def _run(args: argparse.Namespace) -> int:
    if args.cpu:
        return _run_cpu(args)
    from pydantic import ValidationError

    from ledger_lab.bench.exceptions import BenchError
    from ledger_lab.bench.options import BenchOptions
    from ledger_lab.bench.report import table
    from ledger_lab.bench.runner import run_bench
    from ledger_lab.bench.workload import WorkloadSpec

    flags = {
        "intents": args.intents, "keys": args.keys, "duplicate_share": args.duplicate_share,
        "conflict_share": args.conflict_share, "partitions": args.partitions,
        "mode": args.mode, "arms": args.arms, "repeat": args.repeat, "seed": args.seed,
        "latency_rate": args.latency_rate,
        "out": args.out, "smoke": args.smoke,
    }
    try:
        options = BenchOptions(**{k: v for k, v in flags.items() if v is not None})
        options.arm_names()
        sized = options.sized()[0]
        WorkloadSpec(sized.intents, sized.duplicate_share, sized.conflict_share,
                     sized.keys, sized.seed).counts()
    except (ValidationError, ValueError) as exc:  # WorkloadError is a ValueError
        raise CliError(f"invalid benchmark option: {exc}") from exc
    settings = settings_from(args)
    try:
        report = run_bench(options, settings)
    except (BenchError, KafkaSetupError) as exc:
        raise CliError(str(exc)) from exc
    argv = sys.argv[1:]
    report["command"] = shlex.join(["ledger-stream", *argv] if argv[:1] == ["bench"]
                                   else sys.argv)
    print(table(report))
    text = json.dumps(report, indent=2, default=str)
    if options.out:
        Path(options.out).write_text(text + "\n")
        print(f"\nJSON report: {options.out}")
    else:
        print(text)
    if args.charts is not None:
        _draw(report, args.charts, options.out)
    return 0
