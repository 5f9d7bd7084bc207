"""``ledger-stream upgrade-check``: resume every in-flight thread against a new graph in a
dry run, and say per thread whether deploying it is safe (ledger_stream/upgrade/)."""

from __future__ import annotations

import argparse

from ledger_stream.cli.checkpointer import DSN_HELP
from ledger_stream.cli.common import add_common_flags, seconds
from ledger_stream.cli.dry_run import checkpointer_and_ledger, prepare, progress


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "upgrade-check", help="before deploying a new graph version: what it would do to "
        "the threads in flight",
        description="Resume every in-flight thread of the checkpointer (a pending step or "
        "a waiting interrupt) against the new graph, in a dry run: the thread's newest "
        "checkpoint is copied into memory (the checkpointer is opened read-only where it "
        "can be, and never written), and every intent the new code submits is answered by "
        "the ledger's decision core on the key's state as the ledger holds it, never "
        "produced. Per thread: safe, new_effect, conflict, rejected, held, orphan, "
        "dropped_task, error, waiting. The graph's nodes run for real in this process "
        "(models are called; only effects through the ledger are held back). Exit status 1 "
        "when any thread is unsafe (conflict, rejected, orphan, dropped_task, error).")
    parser.add_argument("--graph", required=True, metavar="MODULE:ATTR",
                        help="the new graph: a compiled graph, or a function of no "
                        "arguments that returns one")
    parser.add_argument("--checkpointer", required=True, metavar="DSN",
                        help=f"the threads' checkpointer: {DSN_HELP}")
    parser.add_argument("--threads", nargs="+", metavar="THREAD", default=(),
                        help="check these threads only (default: every thread in flight)")
    parser.add_argument("--resume", metavar="MODULE:ATTR",
                        help="f(thread_id, interrupt_value) -> the answer a human would "
                        "give, to check past interrupts (default: stop at them)")
    parser.add_argument("--group", metavar="NAME", help="the processor's consumer group, "
                        "whose lag the check waits out (env: LEDGER_CONSUMER_GROUP)")
    parser.add_argument("--lag-wait", type=seconds(zero=True), default=30.0, metavar="S",
                        help="seconds to wait for the processor to decide every recorded "
                        "intent before reading key states (default 30)")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ledger_stream.upgrade import check_threads
    from ledger_stream.upgrade.report import as_json, as_table

    run = prepare(args, "upgrade-check")
    with checkpointer_and_ledger(args.checkpointer, run.settings) as (saver, ledger):
        verdicts = check_threads(run.graph, saver, ledger, run.policy, threads=args.threads,
                                 resume=run.resume, lag_wait_s=args.lag_wait,
                                 progress=progress)
    print(as_json(verdicts) if args.json else as_table(verdicts))
    return 1 if any(v.unsafe for v in verdicts) else 0
