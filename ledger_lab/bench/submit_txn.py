"""The floor under a processor hop: one transaction, step by step, on a local Kafka:

    python -m ledger_lab.bench.submit_txn [--rounds N] [--topics N] [--pause-ms MS]
        [--fetch-wait-ms MS ...] [--broker-set KEY=VALUE | --client-set KEY=VALUE] [--json P]

Starts its own local Kafka (1 node) unless ``LEDGER_KAFKA_BOOTSTRAP`` names one. A round is
what a processor batch does with its outputs: ``begin_transaction``, one record to each of
``--topics`` topics, ``flush``, ``send_offsets_to_transaction`` (a group member's offset),
``commit_transaction`` (the client settings the processor uses: idempotent, acks=all, no
linger). Read-committed readers, one per ``--fetch-wait-ms`` (assigned, never group members,
started before the first round), note when each first sees the round's record on the first
topic. A plain round between two transactions produces the same records without one
(idempotent, acks=all, flush): the non-transactional floor, and the time a downstream
writer's answer takes, so with ``--pause-ms 0`` each transaction begins about when the
processor's next batch would. librdkafka's "eos" debug lines count the coordinator's
CONCURRENT_TRANSACTIONS answers (each costs a fixed 20 ms retry). ``--broker-set`` runs a
second local Kafka with those ``server.properties`` and ``--client-set`` second clients with
those librdkafka settings, their rounds interleaved with the first's (A/B in one run).
Prints p50/p90 in ms of each step and of produce-to-readable, and the load average.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC_PREFIX = "submit-txn-"
BLOCK = 5  # rounds in a row on one rig before the next rig's


class Reader:
    """A read-committed consumer on partition 0 that notes when each value first arrives."""

    def __init__(self, common: dict[str, Any], topic: str, fetch_wait_ms: int) -> None:
        self.fetch_wait_ms = fetch_wait_ms
        self.seen: dict[bytes, float] = {}
        self._consumer = Consumer({
            **common, "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "fetch.wait.max.ms": fetch_wait_ms})
        self._consumer.assign([TopicPartition(topic, 0, 0)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                self.seen.setdefault(msg.value() or b"", time.monotonic())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": statistics.median(ordered),
            "p90": ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]}


class _Refusals(logging.Handler):
    """Counts the coordinator's CONCURRENT_TRANSACTIONS answers in librdkafka's "eos" debug
    lines: a transaction that adds a partition while the one before is still being completed
    (its markers written) is refused, and librdkafka retries after a fixed 20 ms."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.lines = 0  # every "eos" line heard: none means the count is not listening
        self.logger = logging.getLogger(f"submit-txn-{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += 1
        if "another concurrent operation" in record.getMessage():
            self.count += 1


class Rig:
    """A group member, transactional and plain producers and readers on ``topics`` new
    topics of one broker; ``client`` goes into every one of its clients' settings."""

    def __init__(self, bootstrap: str, fetch_waits: list[int], topics: int,
                 client: dict[str, str], transactional_ids: int = 1) -> None:
        """``transactional_ids``: producers taking the transactions in turn (2: each one's
        next transaction begins one transaction later, after its last one completed)."""
        self.topics = [f"{TOPIC_PREFIX}{uuid.uuid4().hex[:8]}" for _ in range(topics)]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in self.topics]).values():
            future.result()
        common = {"bootstrap.servers": bootstrap, **client}
        self.member = Consumer({**common, "group.id": f"submit-txn-{uuid.uuid4().hex[:8]}",
                                "enable.auto.commit": False})
        self.member.subscribe(self.topics[:1])
        while not self.member.assignment():
            self.member.poll(0.1)
        base = {**common, "enable.idempotence": True, "acks": "all", "linger.ms": 0}
        self.refusals = _Refusals()
        self.txns = [Producer({**base, "transactional.id": f"submit-txn-{uuid.uuid4().hex}",
                               "transaction.timeout.ms": 10_000,
                               # its transaction lines: the coordinator's refusals counted
                               "debug": "eos", "logger": self.refusals.logger})
                     for _ in range(transactional_ids)]
        for producer in self.txns:
            producer.init_transactions(30)
        self._turn = 0
        self.plain = Producer(base)
        self.readers = [Reader(common, self.topics[0], wait) for wait in fetch_waits]

    @property
    def txn(self) -> Producer:
        """The producer whose turn it is (each call the next)."""
        self._turn += 1
        return self.txns[self._turn % len(self.txns)]

    def produce(self, producer: Producer, value: bytes) -> None:
        for topic in self.topics:
            producer.produce(topic, value, key=b"k", partition=0)

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        self.member.close()


def measure(rigs: dict[str, Rig], rounds: int, pause_s: float) -> dict[str, Any]:
    """``rounds`` of each kind on each rig, interleaved."""
    time.sleep(2)  # the readers' first fetch is parked
    steps: dict[str, list[float]] = {}
    readable: dict[str, list[float]] = {}

    label = ""

    def note(name: str, ms: float) -> None:
        steps.setdefault(f"{label}{name}", []).append(ms)

    kinds = ("txn", "plain")
    for i in range(rounds * len(kinds) * len(rigs)):
        kind = kinds[i % len(kinds)]
        # Blocks of BLOCK rounds per rig: within one, each transaction follows the one
        # before as closely as a processor's next batch would (--pause-ms 0).
        label, rig = list(rigs.items())[(i // (len(kinds) * BLOCK)) % len(rigs)]
        topic, member, plain, readers = rig.topics[0], rig.member, rig.plain, rig.readers
        value = f"{i}-{uuid.uuid4().hex}".encode()
        t0 = time.monotonic()
        if kind == "txn":
            txn = rig.txn
            txn.begin_transaction()
            rig.produce(txn, value)
            txn.flush(10)
            t1 = time.monotonic()
            txn.send_offsets_to_transaction([TopicPartition(topic, 0, i + 1)],
                                            member.consumer_group_metadata(), 10)
            t2 = time.monotonic()
            txn.commit_transaction(10)
            t3 = time.monotonic()
            note("txn produce+flush", (t1 - t0) * 1000)
            note("txn send_offsets", (t2 - t1) * 1000)
            note("txn commit", (t3 - t2) * 1000)
            note("txn total", (t3 - t0) * 1000)
        else:
            rig.produce(plain, value)
            plain.flush(10)
            note("plain produce+flush", (time.monotonic() - t0) * 1000)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(value not in r.seen for r in readers):
            time.sleep(0.0005)
        for r in readers:
            if value in r.seen:
                readable.setdefault(f"{label}{kind} readable, fetch.wait.max.ms={r.fetch_wait_ms}",
                                    []).append((r.seen[value] - t0) * 1000)
        time.sleep(pause_s)  # 0: the next round begins as a reader's answer would
    refused = {}
    for label, rig in rigs.items():
        for producer in rig.txns:
            producer.poll(0.2)  # the last debug lines
        refused[f"{label}CONCURRENT_TRANSACTIONS answers"] = rig.refusals.count
        rig.close()
    return {"steps": {k: _quantiles(v) for k, v in steps.items()},
            "readable": {k: _quantiles(v) for k, v in readable.items()},
            "refused": refused, "transactions_per_rig": rounds}


@contextmanager
def _broker_with(extra: dict[str, str], say: Callable[[str], None]) -> Iterator[str]:
    """A local Kafka whose ``server.properties`` also sets ``extra``."""
    from ledger_lab.local_kafka import cluster
    from ledger_lab.local_kafka.ephemeral import kafka_for
    from ledger_stream.config import Settings

    plain_render = cluster.render

    def render(*args: Any, **kwargs: Any) -> str:
        return plain_render(*args, **kwargs) + "".join(f"{k}={v}\n" for k, v in extra.items())

    cluster.render = render  # type: ignore[assignment]
    try:
        with kafka_for(Settings(kafka_bootstrap=None), say) as (bootstrap, _):
            cluster.render = plain_render  # type: ignore[assignment]
            yield bootstrap
    finally:
        cluster.render = plain_render  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.bench.submit_txn",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, metavar="N",
                        help="transactions (and as many plain rounds) per series (default 40)")
    parser.add_argument("--fetch-wait-ms", type=int, nargs="+", default=[10, 50, 500],
                        metavar="MS", help="one reader per value, all polling at once "
                        "(default 10 50 500)")
    parser.add_argument("--broker-set", action="append", default=[], metavar="KEY=VALUE",
                        help="also run a second local Kafka with these server.properties "
                        "(B), its rounds interleaved with the first's (A)")
    parser.add_argument("--client-set", action="append", default=[], metavar="KEY=VALUE",
                        help="also run clients with these librdkafka settings (B) on the "
                        "same broker, their rounds interleaved with the plain clients' (A)")
    parser.add_argument("--alternate", action="store_true",
                        help="also run B: two transactional producers on the same broker "
                        "taking the transactions in turn, interleaved with A (one)")
    parser.add_argument("--topics", type=int, default=1, metavar="N",
                        help="records per round, one to each of N topics (default 1; a "
                        "processor's batch writes a dispatch, a receipt and a changelog "
                        "record: 3)")
    parser.add_argument("--pause-ms", type=float, default=20, metavar="MS",
                        help="pause between a round's record turning readable and the next "
                        "round (default 20)")
    parser.add_argument("--json", type=Path, metavar="PATH")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.topics < 1 or args.pause_ms < 0:
        parser.error("--rounds and --topics must be at least 1, --pause-ms not negative")
    if any("=" not in item for item in [*args.broker_set, *args.client_set]):
        parser.error("--broker-set and --client-set take KEY=VALUE")
    extra = dict(item.split("=", 1) for item in args.broker_set)
    client = dict(item.split("=", 1) for item in args.client_set)
    if sum(map(bool, (extra, client, args.alternate))) > 1:
        parser.error("--broker-set, --client-set and --alternate: one at a time")

    def say(line: str) -> None:
        print(f"[submit-txn] {line}", file=sys.stderr, flush=True)

    with ExitStack() as stack:
        given = os.environ.get("LEDGER_KAFKA_BOOTSTRAP")
        first = given or stack.enter_context(_broker_with({}, say))
        ab = bool(extra or client or args.alternate)
        rigs = {"A " if ab else "": Rig(first, args.fetch_wait_ms, args.topics, {})}
        if extra:
            second = stack.enter_context(_broker_with(extra, say))
            rigs["B "] = Rig(second, args.fetch_wait_ms, args.topics, {})
        elif client:
            rigs["B "] = Rig(first, args.fetch_wait_ms, args.topics, client)
        elif args.alternate:
            rigs["B "] = Rig(first, args.fetch_wait_ms, args.topics, {}, transactional_ids=2)
        found = measure(rigs, args.rounds, args.pause_ms / 1000)
    found["load"] = os.getloadavg()
    found["b"] = {"broker": extra, "client": client, "alternate": args.alternate}
    found["topics"] = args.topics
    for section in ("steps", "readable"):
        for name, q in sorted(found[section].items()):
            print(f"{name:<52} p50 {q['p50']:6.2f}  p90 {q['p90']:6.2f} ms")
    for name, count in found["refused"].items():
        print(f"{name:<52} {count} in {found['transactions_per_rig']} transactions")
    b = extra or client or ("two transactional ids in turn" if args.alternate else "-")
    print(f"{args.topics} topic(s) a round; B: {b}; "
          f"load average {found['load'][0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
