"""Where a submit's time goes:

    python -m ledger_lab.bench.submit_timeline [--calls N] [--guarantee G] [--call-ms MS]
                                                [--pregrant-ms MS] [--warm-up N] [--json PATH]

Starts its own local Kafka (1 node), a processor with the given guarantee, the payments
sandbox (``--call-ms`` per call) and its HTTP connector; makes ``--calls`` duplicate submits
through the processor (a client with its receipt cache off), as many answered from the
client's receipt cache, and as many fresh ones, one at a time. Then it reads every ledger
topic back and places each record of a submit on that submit's timeline twice: when its
producer called ``produce`` (the record's timestamp; one machine, one clock) and when a
read-committed reader, started before the first submit, first saw it (so the gap between
the two is the writer's flush and transaction commit plus one fetch). For each step it
prints the percentiles in ms from the start of the submit, the fresh submit's median path
hop by hop, the CPU the processor, the connector and the client (this process less its
reader thread) used per fresh effect (/proc, per PID), the raw Kafka round trip (produce
with acks=all, read back) and the load average.

The broker is warmed first: ``--warm-up`` rounds (default 1) of the same measurement, on
the same broker, are run and discarded. A fresh broker's JVM has not compiled its hot paths
yet, and every hop is slower until it has: measured on one broker, the raw round trip p50
2.2 ms in the first round and 0.4 to 0.6 ms in the next three, a duplicate through the
processor 23.3 ms and then 7.1 to 11.7 ms, a fresh submit 76.9 and then 51.5 to 59.7 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from ledger_lab.bench.submit_hops import DONE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.bench.submit_timeline",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100, metavar="N",
                        help="submits of each kind: duplicates through the processor, "
                        "duplicates from the client's receipt cache, fresh (default 100)")
    parser.add_argument("--guarantee", choices=("exactly-once", "at-least-once"),
                        default="exactly-once",
                        help="the processor's processing guarantee (default exactly-once)")
    parser.add_argument("--call-ms", type=int, default=20, metavar="MS",
                        help="the sandbox's time per call (default 20)")
    parser.add_argument("--pregrant-ms", type=int, default=0, metavar="MS",
                        help="the processor's LEDGER_PREGRANT_LEASE_MS (default 0: off; "
                        "exactly once only)")
    parser.add_argument("--gap-ms", type=int, default=0, metavar="MS",
                        help="pause between two submits (default 0: back to back, as one "
                        "agent's sequential steps)")
    parser.add_argument("--warm-up", type=int, default=1, metavar="N",
                        help="rounds of the same measurement run first and discarded, so "
                        "that the broker's JVM has compiled its hot paths (default 1)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error(f"--calls must be at least 1 (got {args.calls})")
    for flag in ("call_ms", "gap_ms", "warm_up", "pregrant_ms"):
        if getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')} must not be negative "
                         f"(got {getattr(args, flag)})")

    from ledger_lab.bench.submit_hops import as_json, hops, load_average, percentiles
    from ledger_lab.local_kafka.ephemeral import kafka_for
    from ledger_stream.config import Settings

    def say(line: str) -> None:
        print(f"[submit-timeline] {line}", file=sys.stderr, flush=True)

    load_before = load_average()
    with kafka_for(Settings(kafka_bootstrap=None), say) as (bootstrap, _):
        for round_ in range(args.warm_up + 1):
            if round_ < args.warm_up:
                say(f"warm-up round {round_ + 1} of {args.warm_up} (discarded)")
            found = measure(bootstrap, Path(tempfile.mkdtemp(prefix="ledger-timeline-")),
                            say, calls=args.calls, guarantee=args.guarantee,
                            call_ms=args.call_ms, gap_s=args.gap_ms / 1000,
                            pregrant_ms=args.pregrant_ms)
    steps, readable, raw, cpu = found
    load = {"before": load_before, "after": load_average()}
    print(f"guarantee {args.guarantee}, pre-grant {args.pregrant_ms} ms, {args.gap_ms} ms "
          f"between submits, target call "
          f"{args.call_ms} ms; raw round trip p50 {statistics.median(raw):.2f} ms; load "
          f"average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after")
    for kind, rows in steps.items():
        print(f"{kind} submit ({len(rows[DONE])} calls), ms from the submit's start: "
              "handed over (the record's timestamp), readable (a read-committed reader)")
        for step, values in rows.items():
            made, seen = percentiles(values), percentiles(readable[kind].get(step, []))
            print(f"  {step:<34} p50 {made['p50']:7.1f}  p90 {made['p90']:7.1f}  "
                  f"p99 {made['p99']:7.1f}   readable p50 {seen['p50']:7.1f}")
    print("fresh submit, hop by hop (medians):")
    for hop, value in hops(steps["fresh"], readable["fresh"]):
        print(f"  {hop:<64} {value['ms']:7.1f} ms")
    effects = len(steps["fresh"][DONE])
    print(f"CPU per fresh effect (ms), {effects} effects: " + ", ".join(
        f"{name} {used * 1000 / effects:.2f}" for name, used in cpu.items())
        + f", stack {sum(cpu.values()) * 1000 / effects:.2f}")
    if args.json:
        args.json.write_text(json.dumps({
            "guarantee": args.guarantee, "pregrant_ms": args.pregrant_ms,
            "call_ms": args.call_ms, "calls": args.calls,
            "warm_up_rounds": args.warm_up,
            "raw_round_trip_ms": percentiles(raw), "load_average": load,
            "handed_over": as_json(steps), "readable": as_json(readable),
            "hops_fresh_ms": dict(hops(steps["fresh"], readable["fresh"])),
            "cpu_ms_per_fresh_effect": {name: used * 1000 / effects
                                        for name, used in cpu.items()}}, indent=2) + "\n")
    return 0

Submits = list[tuple[str, str, str, float, float]]  # kind, key, event id, start, end


def measure(bootstrap: str, folder: Path, say: Any, *, calls: int, guarantee: str,
            call_ms: int, gap_s: float = 0.0, pregrant_ms: int = 0
            ) -> tuple[Steps, Steps, list[float], dict[str, float]]:
    """({kind: {step: [ms from the start, one per submit]}} as handed over, the same as
    readable, raw round trips in ms, {process: CPU seconds over the fresh submits}). Kinds:
    "duplicate" (the receipt cache off: the processor answers), "duplicate (cache)" and
    "fresh"."""
    from ledger_lab.bench.arms.connector import CONNECTOR_ENV
    from ledger_lab.bench.arms.sdk import raw_round_trips
    from ledger_lab.bench.processes import throwaway_approver_env
    from ledger_lab.bench.submit_hops import ROLES, CpuMeter, Watcher
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
    watcher = Watcher(bootstrap, [s.topic(role) for role in ROLES], 3)
    sandbox = SandboxProc(folder / "sandbox.db", latency_ms=call_ms)
    (folder / "stack").mkdir(parents=True, exist_ok=True)
    stack = Stack(s, folder / "stack", processor_env={
        **throwaway_approver_env(),
        "LEDGER_PROCESSING_GUARANTEE": guarantee,
        "LEDGER_PREGRANT_LEASE_MS": str(pregrant_ms)})
    submits: Submits = []
    try:
        connector = stack.connector("http", "--name", "payments", "--base-url", sandbox.url,
                                    env=CONNECTOR_ENV)
        workflow = Workflow("bench-timeline", "1.0", "thread", "refund")
        uncached = s.model_copy(update={"sdk_receipt_cache": False})
        with LedgerClient(s) as client, LedgerClient(uncached) as plain:
            repeated = operation_key("acme", "refund", "repeated")
            client.submit(client.intent(repeated, "refund", "payments", {"n": 0},
                                        workflow=workflow), wait=60)
            plain.submit(plain.intent(repeated, "refund", "payments", {"n": 0},
                                      workflow=workflow), wait=60)  # its hub started
            cpu = CpuMeter({"processor": stack.processor.pid, "connector": connector.pid},
                           watcher)
            for kind, by in (("duplicate", plain), ("duplicate (cache)", client),
                             ("fresh", client)):
                say(f"{kind} submits")
                if kind == "fresh":
                    cpu.start()
                for i in range(calls):
                    key = repeated if kind != "fresh" else operation_key(
                        "acme", "refund", uuid.uuid4().hex[:12])
                    intent = by.intent(key, "refund", "payments",
                                       {"n": 0 if kind != "fresh" else i + 1},
                                       workflow=workflow)
                    began = time.time()
                    by.submit(intent, wait=60)
                    submits.append((kind, key, intent.event_id, began, time.time()))
                    time.sleep(gap_s)
                if kind == "fresh":
                    cpu.stop()
    finally:
        stack.close()
        sandbox.stop()
        watcher.close()
    say("reading the topics back")
    made, seen = _timelines(bootstrap, s, submits, watcher)
    return made, seen, raw, cpu.used


def _timelines(bootstrap: str, s: Any, submits: Submits, watcher: Any
               ) -> tuple[Steps, Steps]:
    """Each submit's steps as handed over and as readable (``submit_hops.Watcher``)."""
    from ledger_lab.bench.submit_hops import ROLES, visible_at
    from ledger_stream.kafka.reader import read_topic
    from ledger_stream.serde import AvroCodec
    from ledger_stream.serde.exceptions import DecodeError

    codec = AvroCodec()
    found: Records = defaultdict(list)
    located: dict[bytes, list[tuple[int, int, int, int, str, str, str]]] = defaultdict(list)
    for index, role in enumerate(ROLES):
        for key, at, value, partition, offset in read_topic(
                bootstrap, s.topic(role), timeout_s=60, convert=(
                    lambda m: (m.key() or b"", m.timestamp()[1], m.value(),
                               m.partition() or 0, m.offset() or 0))):
            try:
                event = codec.decode(value)
            except DecodeError:
                continue  # not a ledger event: not a step
            answers = getattr(event, "intent_event_id", "") or getattr(event, "event_id", "")
            found[key].append((at, role, type(event).__name__, answers))
            located[key].append((index, partition, offset, at, role, type(event).__name__,
                                 answers))
    readable = place(visible_at(watcher, located), submits)
    for rows in readable.values():
        rows.pop(DONE, None)
    return place(found, submits), readable


Records = dict[bytes, list[tuple[int, str, str, str]]]  # key -> (ms, role, type, answers)
Steps = dict[str, dict[str, list[float]]]


def place(found: Records, submits: Submits) -> Steps:
    """Each submit's records (a duplicate's: only those answering its intent) as ms from
    its start, by step; a step seen twice in one submit is numbered."""
    steps: dict[str, dict[str, list[float]]] = {}
    for kind, key, event_id, began, ended in submits:
        rows = steps.setdefault(kind, {})
        seen: dict[str, int] = defaultdict(int)
        for at, role, name, answers in sorted(found[key.encode()]):
            if kind != "fresh" and answers != event_id:
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
