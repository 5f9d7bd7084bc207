"""What the processor's broker tests share: reading topics as they are (read_committed),
the pure model of what a crash-free processor outputs, and waiting on real processes."""

from __future__ import annotations

import json
import random
import re
import signal
import socket
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from ledger_lab.harness.processes import Proc, start_processor
from ledger_stream.config import Settings
from ledger_stream.domain import absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import KeyState
from ledger_stream.kafka.offsets import end_offset
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.reader import read_topic
from ledger_stream.processor.policy import policy_from
from ledger_stream.serde import AvroCodec, DecodeError
from tests.factories import intent, now_of

CODEC = AvroCodec()
# A processor whose replays are byte-identical: no Ticks (with intents alone, a partition's
# records are decided in one order on every replay; Ticks on attempts-p could interleave with
# intents-p differently after a restart and move the clock at another record), and small
# batches (several per process).
QUIET = {"LEDGER_TICK_INTERVAL_MS": "600000", "LEDGER_MAX_BATCH": "150"}


@dataclass(frozen=True, slots=True)
class Raw:
    """One record as a read_committed consumer sees it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()

    def event(self) -> Any:
        try:
            return CODEC.decode(self.value) if self.value is not None else None
        except DecodeError:
            return None


def read_raw(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[Raw]:
    """Every committed record of ``topic`` up to its end now, in offset order per partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        tps = [TopicPartition(topic, p) for p in meta.partitions]
        ends = {tp.partition: end_offset(consumer, tp) for tp in tps}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
        found: list[Raw] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            positions = consumer.position(tps)
            if all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0
                   for tp in positions):
                break
            for msg in consumer.consume(1000, timeout=0.2):
                if not msg.error():
                    found.append(Raw(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                     tuple(msg.headers() or ())))
        else:
            raise AssertionError(f"{topic}: end not reached in {timeout_s} s")
        return sorted(found, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def read_all(settings: Settings, role: str) -> list[Any]:
    return read_topic(settings.kafka_bootstrap, settings.topic(role))


def receipts_for(settings: Settings, intent_ids: set[str], timeout_s: float = 90.0,
                 proc: Proc | None = None) -> list[ev.Receipt]:
    """Receipts until every intent id has one (fails with the processor's log if not)."""
    records = read_topic(
        settings.kafka_bootstrap, settings.topic("receipts"), timeout_s=timeout_s,
        until=lambda rs: intent_ids <= {r.intent_event_id for r in rs},
    )
    missing = intent_ids - {r.intent_event_id for r in records}
    assert not missing, f"{len(missing)} intents without a receipt\n" + (
        proc.tail() if proc else "")
    return records


def wait_for(what: str, check: Callable[[], bool], timeout_s: float,
             procs: Iterable[Proc] = (), every_s: float = 0.3) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every_s)
    logs = "\n".join(f"--- {p.log.name}\n{p.tail(25)}" for p in procs)
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


def wait_exit(proc: Proc, timeout_s: float) -> int:
    """The exit status of ``proc``, once it exits by itself (a failpoint, a refusal)."""
    wait_for(f"{proc.log.name} to exit", lambda: not proc.alive(), timeout_s, [proc])
    return int(proc.popen.wait(1))


def kill_all(procs: Iterable[Proc]) -> None:
    """SIGKILL whichever of ``procs`` still runs (a test that failed half-way)."""
    for proc in procs:
        if proc.alive():
            proc.kill()


def run_to_the_failpoint(settings: Settings, state_dir: Path, log: Path, point: str,
                         *args: str, env: dict[str, str] = QUIET) -> None:
    """Run a processor (``args`` its flags, ``env`` its environment) with
    ``LEDGER_FAILPOINT=point`` until it dies there by SIGKILL, within 90 s: one that ends
    otherwise fails the test, one still running is killed."""
    proc = start_processor(settings, state_dir, log, *args,
                           env={**env, "LEDGER_FAILPOINT": point})
    try:
        assert wait_exit(proc, 90) == -signal.SIGKILL, proc.tail()
    finally:
        kill_all([proc])


def log_lines(proc: Proc, pattern: str) -> list[str]:
    text = proc.log.read_text(errors="replace")
    return [line for line in text.splitlines() if re.search(pattern, line)]


def served_metrics_port(proc: Proc, timeout_s: float = 30.0) -> int:
    """The port a process started with ``--metrics-port 0`` logged it serves /metrics on."""
    found: list[int] = []

    def logged() -> bool:
        found.extend(json.loads(line)["port"] for line in log_lines(proc, '"metrics served"'))
        return bool(found)

    wait_for("the metrics port in the log", logged, timeout_s, [proc])
    return found[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


# --- the model: what a crash-free processor outputs ------------------------------------------


def model_outputs(settings: Settings, events: Iterable[ev.InputEvent]) -> dict[str, Any]:
    """Every output of the pure core over the events, by id (times zeroed: the processor
    decides at broker timestamps, which the test does not know)."""
    policy = policy_from(settings)
    states: dict[str, KeyState] = {}
    outputs: dict[str, Any] = {}
    for event in events:
        key = event.key  # type: ignore[union-attr]
        decision = decide(states.get(key) or absent(key), event, policy, now_of(event))
        states[key] = decision.state
        for out in decision.outputs:
            outputs[output_id(out)] = timeless(out)
    return outputs


def model_states(settings: Settings, by_key: dict[str, list[ev.InputEvent]]
                 ) -> dict[str, KeyState]:
    policy = policy_from(settings)
    final = {}
    for key, events in by_key.items():
        state = absent(key)
        for event in events:
            state = decide(state, event, policy, now_of(event)).state
        final[key] = state
    return final


def output_id(out: Any) -> str:
    for name in ("receipt_id", "dispatch_id", "alert_id"):
        if hasattr(out, name):
            return f"{type(out).__name__}:{getattr(out, name)}"
    return f"{type(out).__name__}:{out.key}:{out.attempt}:{out.claim_id}"


TIME_FIELDS = ("at_ms", "not_before_ms", "lease_until_ms")


def timeless(out: Any) -> Any:
    return replace(out, **{name: 0 for name in TIME_FIELDS if hasattr(out, name)})


def outputs_in_topics(settings: Settings) -> tuple[dict[str, Any], dict[str, list[bytes]]]:
    """(every output by id with times zeroed, every copy's bytes by id) on the output
    topics, as a read_committed reader sees them."""
    by_id: dict[str, Any] = {}
    copies: dict[str, list[bytes]] = defaultdict(list)
    for role in ("dispatch", "receipts", "alerts"):
        for raw in read_raw(settings.kafka_bootstrap, settings.topic(role)):
            out = raw.event()
            if out is None:
                continue
            oid = output_id(out)
            by_id[oid] = timeless(out)
            copies[oid].append(raw.value or b"")
    return by_id, copies


def one_dispatch_id_per_key(settings: Settings) -> None:
    dispatch_ids: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for d in read_all(settings, "dispatch"):
        if isinstance(d, ev.Dispatch):
            dispatch_ids[d.key].add((d.dispatch_id, d.attempt))
    doubled = {k: v for k, v in dispatch_ids.items() if len(v) != 1}
    assert not doubled, f"keys dispatched with different attempt ids: {list(doubled)[:5]}"


def assert_outputs_match_the_model(settings: Settings, events: list[ev.Intent],
                                    exactly_once: bool) -> None:
    """The distinct outputs on the topics are the pure core's (by id and content, times
    aside); every copy of one output is byte-identical; exactly once: one copy each."""
    found, copies = outputs_in_topics(settings)
    expected = model_outputs(settings, events)
    assert found.keys() == expected.keys()
    assert found == expected
    assert all(len(set(c)) == 1 for c in copies.values()), "copies differ in bytes"
    if exactly_once:
        doubled = [oid for oid, c in copies.items() if len(c) > 1]
        assert not doubled, f"{len(doubled)} outputs visible twice, e.g. {doubled[:3]}"
    one_dispatch_id_per_key(settings)


def intent_stream(keys: int, seed: int, conflicts: bool = True) -> list[ev.Intent]:
    """Intents in a random order (``seed``): one per key, duplicates (same arguments) for a
    quarter of the keys and, with ``conflicts``, other arguments for a twentieth."""
    rng = random.Random(seed)
    events = [intent(key=f"acme/pay/k{i}", args={"amount": i}) for i in range(keys)]
    events += [intent(key=f"acme/pay/k{i}", args={"amount": i})
               for i in rng.sample(range(keys), keys // 4)]
    if conflicts:
        events += [intent(key=f"acme/pay/k{i}", args={"amount": -1})
                   for i in rng.sample(range(keys), keys // 20)]
    rng.shuffle(events)
    return events


def send_over_time(settings: Settings, events: list[ev.Intent], seconds: float) -> None:
    """Produce ``events`` to the intents topic in chunks, one every 0.1 s, over about
    ``seconds`` (a processor started meanwhile sees a stream, not one backlog)."""
    producer = EventProducer(settings, settings.kafka_bootstrap)
    chunk = max(1, len(events) // int(seconds * 10))
    for start in range(0, len(events), chunk):
        for event in events[start:start + chunk]:
            producer.send("intents", event)
        producer.flush()
        time.sleep(0.1)
    producer.close()


def streaming(settings: Settings, events: list[ev.Intent], seconds: float) -> threading.Thread:
    """``send_over_time`` on a daemon thread, started (join it before reading the outputs)."""
    stream = threading.Thread(target=send_over_time, args=(settings, events, seconds),
                              daemon=True)
    stream.start()
    return stream
