"""``ledger-stream kafka up|status|down``: the local Apache Kafka (docs/design.md, 'A real
Kafka without Docker').

``up`` fetches the jars once, starts the broker(s) in the background and returns when they
answer; ``down`` stops them by PID. With LEDGER_KAFKA_BOOTSTRAP (or ``--bootstrap``) set,
the ledger uses that cluster and ``up`` starts nothing.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ledger_lab.local_kafka import ClusterStatus, LocalCluster, ensure_jars, jar_cache
from ledger_lab.local_kafka.cluster import DEFAULT_START_TIMEOUT_S, DEFAULT_STOP_TIMEOUT_S
from ledger_lab.local_kafka.discovery import running_clusters
from ledger_stream.cli.common import CliError, add_common_flags, settings_from
from ledger_stream.kafka.exceptions import KafkaSetupError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "kafka",
        help="run a local Apache Kafka broker (no Docker)",
        description="Run a real Apache Kafka (KRaft) from Maven Central jars on local Java 17+.",
    )
    actions = parser.add_subparsers(dest="kafka_action", metavar="ACTION", required=True)

    up = actions.add_parser(
        "up",
        help="start the local Kafka and wait until it answers",
        description="Fetch Kafka's jars once (needs mvn) into LEDGER_JAR_CACHE (default "
        "~/.cache/ledger-stream/jars, shared by every --home), start 1 or 3 KRaft nodes "
        "on 127.0.0.1 in the background and print the bootstrap address when they answer. "
        "Data is kept in HOME/cluster between `down` and `up`. Starts nothing when "
        "LEDGER_KAFKA_BOOTSTRAP or --bootstrap names a cluster.",
    )
    up.add_argument(
        "--nodes",
        type=int,
        choices=(1, 3),
        help="1 combined broker+controller (default), or 3 (replication 3, min ISR 2)",
    )
    up.add_argument(
        "--port",
        type=_port,
        metavar="N",
        help="first port: node i listens on N+2(i-1) (broker) and the next port (controller); "
        "default: free ports",
    )
    up.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_START_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for the brokers to answer (default {DEFAULT_START_TIMEOUT_S:.0f})",
    )
    up.add_argument("--json", action="store_true",
                    help="print one JSON object (bootstrap, nodes, pids) instead of prose")
    add_common_flags(up)
    up.set_defaults(handler=_up)

    status = actions.add_parser(
        "status",
        help="show whether the local Kafka runs, its PIDs and bootstrap",
        description="Show the local Kafka's state. Exit status 0 when it runs, 1 when not.",
    )
    status.add_argument("--json", action="store_true",
                        help="print one JSON object (running, bootstrap, nodes) instead of prose")
    add_common_flags(status)
    status.set_defaults(handler=_status)

    down = actions.add_parser(
        "down",
        help="stop the local Kafka",
        description="Stop the local Kafka by PID: SIGTERM, then SIGKILL after --timeout. "
        "When this home runs none, says so; the exit status is then 1 if a local Kafka of "
        "another home runs (it names that home's `kafka down` line), else 0.",
    )
    down.add_argument(
        "--wipe", action="store_true", help="also delete its data (topics, offsets, logs)"
    )
    down.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_STOP_TIMEOUT_S,
        metavar="SECONDS",
        help=f"SIGKILL brokers still running after this (default {DEFAULT_STOP_TIMEOUT_S:.0f})",
    )
    add_common_flags(down)
    down.set_defaults(handler=_down)

    fetch = actions.add_parser(
        "fetch",
        help="fetch the Kafka jars from Maven Central (once) without starting anything",
        description="Resolve Apache Kafka's broker jars with Maven into the jar cache "
        "(LEDGER_JAR_CACHE, default ~/.cache/ledger-stream/jars). Does nothing when they "
        "are there already.",
    )
    add_common_flags(fetch)
    fetch.set_defaults(handler=_fetch)


def _as_json(status: ClusterStatus, started: bool, external: str | None = None) -> str:
    """One line for scripts: ``bootstrap`` is what LEDGER_KAFKA_BOOTSTRAP should be."""
    return json.dumps({
        "bootstrap": external or status.bootstrap, "external": external is not None,
        "running": external is not None or status.running, "started": started,
        "cluster_dir": None if external else str(status.cluster_dir),
        "nodes": [] if external else [
            {"node_id": n.node_id, "pid": n.pid, "alive": n.alive,
             "broker": f"127.0.0.1:{n.broker_port}",
             "controller": f"127.0.0.1:{n.controller_port}",
             "log": str(n.dir / "broker.log")} for n in status.nodes]})


def _up(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if settings.connection.bootstrap:
        if args.json:
            print(_as_json(LocalCluster.for_settings(settings).status(), False,
                           settings.connection.bootstrap))
            return 0
        print(
            f"using the Kafka at {settings.connection.bootstrap} "
            "(--bootstrap / LEDGER_KAFKA_BOOTSTRAP); nothing started"
        )
        return 0
    cluster = LocalCluster.for_settings(settings, progress=_progress)
    current = cluster.status()
    if current.running:
        if args.nodes and args.nodes != len(current.nodes):
            raise CliError(
                f"a {len(current.nodes)}-node local Kafka already runs at {current.bootstrap}; "
                "run `ledger-stream kafka down --wipe` before starting another size"
            )
        print(_as_json(current, False) if args.json else
              f"local Kafka is already running at {current.bootstrap} ({_nodes(current)})\n"
              f"stop it with `{_down_command(settings.process.home)}`")
        return 0
    try:
        libs = ensure_jars(jar_cache(settings), settings.local.version, progress=_progress)
        started = cluster.start(
            libs,
            settings.local.version,
            nodes=args.nodes or 1,
            base_port=args.port,
            timeout_s=args.timeout,
        )
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        print(_as_json(started, True))
        return 0
    print(f"Kafka {settings.local.version} ready at {started.bootstrap} ({_nodes(started)})")
    print(f"stop it with `{_down_command(settings.process.home)}`")
    return 0


def _fetch(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    try:
        libs = ensure_jars(jar_cache(settings), settings.local.version, progress=_progress)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    print(f"Kafka {settings.local.version} jars in {libs}")
    return 0


def _status(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    status = LocalCluster.for_settings(settings).status()
    if args.json:
        print(_as_json(status, False))
        return 0 if status.running else 1
    if settings.connection.bootstrap:
        print(f"commands use the Kafka at {settings.connection.bootstrap} (LEDGER_KAFKA_BOOTSTRAP)")
    if not status.nodes:
        print(
            f"local Kafka: none in {status.cluster_dir} (start one with `ledger-stream kafka up`)"
        )
        return 1
    state = "running" if status.running else "stopped"
    print(f"local Kafka: {state} at {status.bootstrap} ({_nodes(status)})")
    for node in status.nodes:
        pid = f"pid {node.pid}" if node.alive else "not running"
        print(
            f"  node {node.node_id}: {pid}, broker 127.0.0.1:{node.broker_port}, "
            f"controller 127.0.0.1:{node.controller_port}, log {node.dir / 'broker.log'}"
        )
    return 0 if status.running else 1


def _down(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    cluster = LocalCluster.for_settings(settings)
    result = cluster.stop(timeout_s=args.timeout)
    if result.stopped:
        pids = ", ".join(str(pid) for pid in result.stopped)
        forced = (
            f"; SIGKILL needed for {', '.join(map(str, result.killed))}" if result.killed else ""
        )
        print(f"stopped local Kafka (pid {pids}){forced}")
    else:
        print(f"no local Kafka running in {cluster.cluster_dir}")
    if args.wipe:
        cluster.wipe()
        print(f"deleted {cluster.cluster_dir}")
    return 0 if result.stopped else _report_others(cluster.cluster_dir)


def _report_others(cluster_dir: Path) -> int:
    """After a ``down`` that found nothing: 1 when other homes run a local Kafka (likely the
    one meant, e.g. a forgotten ``--home``), each named with its own stop command."""
    others = [d for d in running_clusters() if d != cluster_dir.resolve()]
    for other in others:
        stop = (f"stop it with `{_down_command(other.parent)}`" if other.name == "cluster"
                else "not under a --home, so the program that started it stops it")
        print(f"a local Kafka of ledger-stream runs in {other}: {stop}", file=sys.stderr)
    return 1 if others else 0


def _down_command(home: Path) -> str:
    """The ``kafka down`` line that stops the cluster of ``home`` (no --home for the default)."""
    from ledger_stream.config import shared_jar_cache

    default = shared_jar_cache().parent
    if home.expanduser().resolve() == default.expanduser().resolve():
        return "ledger-stream kafka down"
    return f"ledger-stream kafka down --home {shlex.quote(str(home))}"


def _nodes(status: ClusterStatus) -> str:
    total = len(status.nodes)
    return f"{status.alive_count}/{total} node{'s' if total > 1 else ''} up"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be within 1..65535, not {port}")
    return port


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
