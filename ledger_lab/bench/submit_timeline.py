"""Where a submit's time goes:

    python -m ledger_lab.bench.submit_timeline [--calls N] [--guarantee G] [--call-ms MS]

Starts its own local Kafka (1 node), a processor with the given guarantee, the payments
sandbox (``--call-ms`` per call) and its HTTP connector; makes ``--calls`` duplicate submits
and as many fresh ones, one at a time, with one ``LedgerClient``. Then it reads every ledger
topic back and places each record of a submit on that submit's timeline by the record's
timestamp: the time its producer called ``produce`` (one machine, one clock). For each step
it prints the median and the 90th percentile, in ms from the start of the submit, beside
the raw Kafka round trip (produce with acks=all, read back).

A record's timestamp is when it was handed to its producer, not when a reader could see it:
under exactly once, a record becomes readable only once its transaction commits, so the gap
from one step to the next holds that transaction.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.bench.submit_timeline",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100, metavar="N",
                        help="duplicate submits, and fresh submits (default 100 each)")
    parser.add_argument("--guarantee", choices=("exactly-once", "at-least-once"),
                        default="exactly-once",
                        help="the processor's processing guarantee (default exactly-once)")
    parser.add_argument("--call-ms", type=int, default=20, metavar="MS",
                        help="the sandbox's time per call (default 20)")
    parser.add_argument("--gap-ms", type=int, default=0, metavar="MS",
                        help="pause between two submits (default 0: back to back, as one "
                        "agent's sequential steps)")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.call_ms < 0 or args.gap_ms < 0:
        parser.error("--calls must be at least 1, --call-ms and --gap-ms not negative")

    from ledger_lab.local_kafka.ephemeral import kafka_for
    from ledger_stream.config import Settings

    def say(line: str) -> None:
        print(f"[submit-timeline] {line}", file=sys.stderr, flush=True)

    with kafka_for(Settings(kafka_bootstrap=None), say) as (bootstrap, _):
        steps, raw = measure(bootstrap, Path(tempfile.mkdtemp(prefix="ledger-timeline-")),
                             say, calls=args.calls, guarantee=args.guarantee,
                             call_ms=args.call_ms, gap_s=args.gap_ms / 1000)
    print(f"guarantee {args.guarantee}, {args.gap_ms} ms between submits; "
          f"raw round trip p50 {statistics.median(raw):.2f} ms")
    for kind, rows in steps.items():
        print(f"{kind} submit ({len(rows[DONE])} calls), ms from the submit's start:")
        for step, values in rows.items():
            ordered = sorted(values)
            p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
            print(f"  {step:<34} p50 {statistics.median(ordered):7.1f}   p90 {p90:7.1f}")
    return 0


DONE = "submit returned"


def measure(bootstrap: str, folder: Path, say: Any, *, calls: int, guarantee: str,
            call_ms: int, gap_s: float = 0.0
            ) -> tuple[dict[str, dict[str, list[float]]], list[float]]:
    """({"duplicate"|"fresh": {step: [ms from the start, one per submit]}}, raw round
    trips in ms)."""
    from ledger_lab.bench.arms.connector import CONNECTOR_ENV
    from ledger_lab.bench.arms.sdk import raw_round_trips
    from ledger_lab.bench.processes import throwaway_approver_env
    from ledger_lab.harness.sandbox import SandboxProc
    from ledger_lab.harness.stack import Stack
    from ledger_stream import LedgerClient, Workflow, operation_key
    from ledger_stream.config import Settings
    from ledger_stream.kafka import topics

    s = Settings(kafka_bootstrap=bootstrap, topic_prefix=f"timeline-{uuid.uuid4().hex[:6]}",
                 partitions=3, replication_factor=1)
    topics.require_matching(topics.create_topics(bootstrap, s))
    say("raw round trips")
    raw = [x * 1000 for x in raw_round_trips(bootstrap, s.topic("alerts"), calls)]
    sandbox = SandboxProc(folder / "sandbox.db", latency_ms=call_ms)
    (folder / "stack").mkdir(parents=True, exist_ok=True)
    stack = Stack(s, folder / "stack", processor_env={
        **throwaway_approver_env(),
        "LEDGER_PROCESSING_GUARANTEE": guarantee})
    submits: list[tuple[str, str, str, float, float]] = []  # kind, key, event id, start, end
    try:
        stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                        env=CONNECTOR_ENV)
        workflow = Workflow("bench-timeline", "1.0", "thread", "refund")
        with LedgerClient(s) as client:
            repeated = operation_key("acme", "refund", "repeated")
            client.submit(client.intent(repeated, "refund", "payments", {"n": 0},
                                        workflow=workflow), wait=60)
            for kind in ("duplicate", "fresh"):
                say(f"{kind} submits")
                for i in range(calls):
                    key = repeated if kind == "duplicate" else operation_key(
                        "acme", "refund", uuid.uuid4().hex[:12])
                    intent = client.intent(key, "refund", "payments",
                                           {"n": 0 if kind == "duplicate" else i + 1},
                                           workflow=workflow)
                    began = time.time()
                    client.submit(intent, wait=60)
                    submits.append((kind, key, intent.event_id, began, time.time()))
                    time.sleep(gap_s)
    finally:
        stack.close()
        sandbox.stop()
    say("reading the topics back")
    return _timelines(bootstrap, s, submits), raw


def _timelines(bootstrap: str, s: Any, submits: list[tuple[str, str, str, float, float]]
               ) -> dict[str, dict[str, list[float]]]:
    from ledger_stream.kafka.reader import read_topic
    from ledger_stream.serde import AvroCodec
    from ledger_stream.serde.exceptions import DecodeError

    codec = AvroCodec()
    found: Records = defaultdict(list)
    for role in ("intents", "dispatch", "attempts", "receipts"):
        for key, at, value in read_topic(bootstrap, s.topic(role), timeout_s=60, convert=(
                lambda m: (m.key() or b"", m.timestamp()[1], m.value()))):
            try:
                event = codec.decode(value)
            except DecodeError:
                continue  # not a ledger event: not a step
            answers = getattr(event, "intent_event_id", "") or getattr(event, "event_id", "")
            found[key].append((at, role, type(event).__name__, answers))
    return place(found, submits)


Records = dict[bytes, list[tuple[int, str, str, str]]]  # key -> (ms, role, type, answers)


def place(found: Records, submits: list[tuple[str, str, str, float, float]]
          ) -> dict[str, dict[str, list[float]]]:
    """Each submit's records (a duplicate's: only those answering its intent) as ms from
    its start, by step; a step seen twice in one submit is numbered."""
    steps: dict[str, dict[str, list[float]]] = {}
    for kind, key, event_id, began, ended in submits:
        rows = steps.setdefault(kind, {})
        seen: dict[str, int] = defaultdict(int)
        for at, role, name, answers in sorted(found[key.encode()]):
            if kind == "duplicate" and answers != event_id:
                continue  # the repeated key's other submits
            step = f"{name} on {role}"
            seen[step] += 1
            if seen[step] > 1:  # a fresh key's second receipt: the one with its outcome
                step = f"{step} ({seen[step]})"
            rows.setdefault(step, []).append(at - began * 1000)
        rows.setdefault(DONE, []).append((ended - began) * 1000)
    for rows in steps.values():  # the submit's end last
        rows[DONE] = rows.pop(DONE)
    return steps


if __name__ == "__main__":
    sys.exit(main())
