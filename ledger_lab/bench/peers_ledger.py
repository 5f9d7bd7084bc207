"""ledger-stream's side of the peers arm alone, with the CPU of every process per effect:

    python -m ledger_lab.bench.peers_ledger [--agents 1,8,64] [--repeat N] [--json PATH]

Starts its own local Kafka (1 node), then the peers arm's ledger-stream contestant (a
processor exactly once, the HTTP connector at the payments sandbox, one ``LedgerClient`` in
this process), warms it as the arm does (``--warm-up`` fresh payments, not measured) and, at
each number of agents, the arm's fresh then duplicate payments
(``peers_client.concurrently``). Besides the arm's figures it prints, per fresh effect: the
CPU ms of the client (this process), the processor, the connector, the sandbox and the
broker, and the records and transaction markers each ledger topic gained (control records:
one per partition a transaction wrote to), so a rate can be read against what it costs and
how the processor batches under exactly once. Levels run in turn, ``--repeat`` times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger_lab.bench.arms.peers_client import WARM_UP_CALLS, body, concurrently, figures_of
from ledger_lab.bench.arms.peers_plan import PeersPlan
from ledger_lab.bench.processes import cpu_seconds
from ledger_lab.bench.submit_hops import load_average

Say = Callable[[str], None]


def topic_counts(bootstrap: str, topics: list[str], start: dict[tuple[str, int], int],
                 end: dict[tuple[str, int], int]) -> dict[str, list[int]]:
    """Per topic, [records, control records] between the ``start`` and ``end`` offsets
    (read committed: every offset not handed over is a transaction marker)."""
    from confluent_kafka import Consumer, TopicPartition

    counts = {topic: [0, 0] for topic in topics}
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}",
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        for (topic, partition), last in end.items():
            first, seen = start.get((topic, partition), 0), 0
            if last <= first:
                continue
            reader.assign([TopicPartition(topic, partition, first)])
            while (msg := reader.poll(2.0)) is not None:
                if msg.error():
                    continue
                seen += 1
                if (msg.offset() or 0) >= last - 1:
                    break
            counts[topic][0] += seen
            counts[topic][1] += last - first - seen
    finally:
        reader.close()
    return counts


def end_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    from confluent_kafka import Consumer, TopicPartition

    from ledger_stream.kafka.offsets import end_offset

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex}"})
    try:
        meta = reader.list_topics(timeout=10).topics
        return {(t, p): end_offset(reader, TopicPartition(t, p))  # type: ignore[arg-type]
                for t in topics if t in meta for p in meta[t].partitions}
    finally:
        reader.close()


def one_level(ledger: Any, pids: dict[str, int], bootstrap: str, topics: list[str],
              agents: int, calls: int) -> dict[str, Any]:
    token = f"l{uuid.uuid4().hex[:10]}"
    for i in range(WARM_UP_CALLS):
        ledger.call(f"{token}-warm-{i}", body(i))
    row: dict[str, Any] = {"agents": agents, "calls": calls}
    for kind in ("fresh", "duplicate"):
        before, ends = {n: cpu_seconds(p) for n, p in pids.items()}, end_offsets(bootstrap,
                                                                                 topics)
        spent, rate, failed = concurrently(
            agents, calls, lambda i: ledger.call(f"{token}-{i}", body(i)))
        after = {n: cpu_seconds(p) for n, p in pids.items()}
        row.update(figures_of(kind, spent, rate))
        row[f"{kind}_errors"] = len(failed)
        row[f"{kind}_cpu_ms_per_call"] = {n: (after[n] - before[n]) * 1000 / calls
                                          for n in pids}
        if kind == "fresh":
            counts = topic_counts(bootstrap, topics, ends, end_offsets(bootstrap, topics))
            row["fresh_records_markers_per_effect"] = {
                t.rsplit(".", 1)[-1]: [round(r / calls, 2), round(m / calls, 2)]
                for t, (r, m) in counts.items()}
    row["load"] = load_average()
    return row


def measure(levels: list[int], repeat: int, say: Say, warm_up: int = 6000
            ) -> list[dict[str, Any]]:
    from ledger_lab.bench.arms.peers import _LedgerContestant
    from ledger_lab.harness.sandbox import SandboxProc
    from ledger_lab.local_kafka.cluster import LocalCluster
    from ledger_lab.local_kafka.jars import ensure_jars, jar_cache
    from ledger_stream.config import Settings
    from ledger_stream.kafka import topics

    settings = Settings(kafka_bootstrap=None)
    libs = ensure_jars(jar_cache(settings), settings.kafka_version, progress=say)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ledger-peers-ledger-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", progress=say)
        try:
            status = cluster.start(libs, settings.kafka_version, nodes=1)
            bootstrap, broker = status.bootstrap, status.nodes[0].pid
            assert bootstrap and broker
            sandbox = SandboxProc(Path(tmp) / "sandbox.db", latency_ms=20)
            ledger = _LedgerContestant(bootstrap, f"pl-{uuid.uuid4().hex[:6]}",
                                       Path(tmp) / "ledger", sandbox.url)
            try:
                names = [t.name for t in topics.ledger_topics(ledger.client.settings)]
                pids = {"client": os.getpid(),
                        "processor": ledger.stack.processor.pid,
                        "connector": ledger.connector.pid, "sandbox": sandbox.pid,
                        "broker": broker}
                ledger.warm(warm_up, say)
                for run in range(repeat):
                    for agents in levels:
                        say(f"{agents} agents ({run + 1}/{repeat})")
                        row = one_level(ledger, pids, bootstrap, names, agents,
                                        max(40, 4 * agents))
                        print(json.dumps(row), flush=True)
                        rows.append(row)
            finally:
                ledger.close()
                sandbox.stop()
        finally:
            say("stopping the local Kafka")
            cluster.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.bench.peers_ledger",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", default="1,8,64", help="levels, comma-separated")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--warm-up", type=int, default=PeersPlan().warm_up_effects,
                        help="fresh payments at 64 agents before measuring (default "
                             "%(default)s; the broker's JIT warm-up)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    levels = [int(a) for a in args.agents.split(",")]
    if args.repeat < 1 or min(levels) < 1:
        parser.error("--repeat and every level must be at least 1")

    def say(line: str) -> None:
        print(f"[peers-ledger] {line}", file=sys.stderr, flush=True)

    rows = measure(levels, args.repeat, say, args.warm_up)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
