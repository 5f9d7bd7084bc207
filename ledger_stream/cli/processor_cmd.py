"""``ledger-stream processor``: run the single writer per operation key until SIGTERM."""

from __future__ import annotations

import argparse
import signal
import threading

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    add_metrics_host_flag,
    port_or_off,
    settings_from,
)
from ledger_stream.kafka.exceptions import KafkaSetupError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "processor",
        help="run the ledger processor (intents + attempts -> receipts, dispatch, alerts)",
        description="Consume ledger.intents and ledger.attempts, decide per operation key "
        "with one RocksDB store per partition (backed by the <prefix>.changelog topic), and "
        "produce receipts, dispatches, alerts and DLQ records. Deadlines fire from the "
        "partition clock (broker timestamps; quiet partitions get Tick records). Refuses to "
        "start when a topic is missing or an input topic's timestamps come from an "
        "unbounded client clock. Runs until SIGTERM or Ctrl-C, then commits, leaves the "
        "group and exits 0. See docs/processor.md.",
    )
    parser.add_argument(
        "--guarantee", choices=("at-least-once", "exactly-once"),
        help="processing guarantee: exactly-once fences a paused or partitioned processor "
        "(its stale batch is aborted), at-least-once does not (env: "
        "LEDGER_PROCESSING_GUARANTEE; default exactly-once)",
    )
    parser.add_argument(
        "--group", metavar="NAME", help="consumer group (env: LEDGER_CONSUMER_GROUP)"
    )
    parser.add_argument(
        "--instance-id", metavar="ID",
        help="stable id of this processor; its transactional id is <group>.<ID>, so a "
        "restart with the same id fences its predecessor at once. Two live processors must "
        "never share one (env: LEDGER_PROCESSOR_INSTANCE_ID; default: a hash of the state "
        "folder)",
    )
    parser.add_argument(
        "--state-dir", metavar="DIR",
        help="RocksDB state folder, one per live processor (env: LEDGER_STATE_DIR; "
        "default HOME/state)",
    )
    parser.add_argument(
        "--metrics-port", type=port_or_off, metavar="PORT",
        help="Prometheus /metrics port, 0 for any free port (logged), off for none (env: "
        "LEDGER_METRICS_PORT; default 9464)",
    )
    parser.add_argument(
        "--action-policy", action="append", default=[], metavar="ACTION.KNOB=VALUE",
        help="one knob of one action's policy, over the file's [actions.ACTION] table "
        "(repeatable): replay_window_ms, max_attempts, retry_after_lookup "
        "(never|deduplicating|always), approval, reversible (true|false); e.g. "
        "send_email.max_attempts=1 (env: LEDGER_ACTIONS, a JSON object)",
    )
    add_metrics_host_flag(parser)
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # SIGTERM while still starting (imports, topic checks, stores) is a request to stop, not
    # a kill: the processor then exits 0 without joining the group.
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    from ledger_stream.processor import ProcessorError, run_processor
    from ledger_stream.processor.metrics import serve_metrics
    from ledger_stream.processor.policy import ConfigError

    settings = settings_from(
        args, processing_guarantee=args.guarantee, consumer_group=args.group,
        processor_instance_id=args.instance_id, state_dir=args.state_dir,
        metrics_port=args.metrics_port, metrics_host=args.metrics_host,
        actions=action_policy_flags(args.action_policy) or None,
    )
    try:
        serve_metrics(settings.processor.metrics_port, "processor", settings.process.metrics_host)
    except OSError as exc:
        port = settings.processor.metrics_port
        raise CliError(f"cannot serve metrics on port {port}: {exc}") from exc
    try:
        run_processor(settings, stop)
    except (KafkaSetupError, ProcessorError, ConfigError) as exc:
        raise CliError(str(exc)) from exc
    return 0


def action_policy_flags(flags: list[str]) -> dict[str, dict[str, str | bool]]:
    """``ACTION.KNOB=VALUE`` flags as ``{ACTION: {KNOB: VALUE}}`` (``true``/``false`` as
    booleans; the settings validate each knob and value, and merge them over the file's)."""
    actions: dict[str, dict[str, str | bool]] = {}
    for flag in flags:
        name, sep, value = flag.partition("=")
        action, dot, knob = name.rpartition(".")
        if not (sep and dot and action and knob):
            raise CliError(f"--action-policy {flag!r}: expected ACTION.KNOB=VALUE, e.g. "
                           "send_email.max_attempts=1")
        lowered = value.strip().lower()
        actions.setdefault(action, {})[knob] = \
            lowered == "true" if lowered in ("true", "false") else value.strip()
    return actions
