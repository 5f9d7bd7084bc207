"""``ledger-stream replay-plan``: for each checkpoint of a thread, what a replay from it
would ask of the ledger, in a dry run (ledger_stream/replay/)."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

from ledger_stream.cli.checkpointer import DSN_HELP
from ledger_stream.cli.common import add_common_flags, seconds
from ledger_stream.cli.dry_run import checkpointer_and_ledger, prepare, progress


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replay-plan", help="which checkpoint of a thread a replay is safe from",
        description="For each checkpoint of the thread (newest first), replay the graph "
        "from it in a dry run: the thread is copied up to the checkpoint into memory (the "
        "checkpointer is opened read-only and never written), and every intent the replay "
        "makes is answered by the ledger's decision core on the key's state as the ledger "
        "holds it, never produced. Findings: safe (the same key and arguments: the "
        "original receipt), new_effect, rejected (other arguments, an expired key), "
        "stale_approval, held, orphan (a key the thread asked for in a step the replay "
        "runs again, which the replay no longer asks for), error, waiting. The graph's "
        "nodes run for real in this process (models are called; only effects through "
        "the ledger are held back). "
        "Exit status 0 when a replay from every checkpoint is safe, 1 when any is not, "
        "2 on a usage, checkpointer or ledger error.")
    parser.add_argument("--graph", required=True, metavar="MODULE:ATTR",
                        help="the graph that would replay: a compiled graph, or a function "
                        "of no arguments that returns one")
    parser.add_argument("--checkpointer", required=True, metavar="DSN",
                        help=f"the thread's checkpointer: {DSN_HELP}")
    parser.add_argument("--thread", required=True, metavar="THREAD", help="the thread id")
    parser.add_argument("--resume", metavar="MODULE:ATTR",
                        help="f(thread_id, interrupt_value) -> the answer a human would "
                        "give, to plan past interrupts (default: stop at them)")
    parser.add_argument("--at", metavar="TIME", type=_when,
                        help="plan a replay started at this ISO 8601 time, for approvals' "
                        "and keys' expiry (default: now)")
    parser.add_argument("--limit", type=_positive, metavar="N",
                        help="plan the newest N checkpoints only (default: every one)")
    parser.add_argument("--group", metavar="NAME", help="the processor's consumer group, "
                        "whose lag the plan waits out (env: LEDGER_CONSUMER_GROUP)")
    parser.add_argument("--lag-wait", type=seconds(zero=True), default=30.0, metavar="S",
                        help="seconds to wait for the processor to decide every recorded "
                        "intent before reading key states (default 30)")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return value


def _when(text: str) -> int:
    """An ISO 8601 time as epoch ms (a time without a zone is UTC)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _run(args: argparse.Namespace) -> int:
    from ledger_stream.replay import exit_status
    from ledger_stream.replay.report import as_json, as_table
    from ledger_stream.replay.run import plan_thread

    run = prepare(args, "replay-plan")
    at = args.at

    def at_ms() -> int:
        return at if at is not None else int(time.time() * 1000)

    with checkpointer_and_ledger(args.checkpointer, run.settings) as (saver, ledger):
        plans = plan_thread(run.graph, saver, ledger, run.policy, args.thread, at_ms=at_ms,
                            resume=run.resume, limit=args.limit,
                            lag_wait_s=args.lag_wait, progress=progress)
    print(as_json(args.thread, plans) if args.json else as_table(args.thread, plans))
    return exit_status(plans)
