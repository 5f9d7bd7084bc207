"""The processor as a real process on the real broker: behaviour, crash, scale-out."""

from __future__ import annotations

import random
import socket
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain import absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.reader import read_topic
from ledger_stream.processor.app import policy_from
from ledger_stream.testing.processes import Proc, start_processor
from tests.factories import intent, outcome

pytestmark = pytest.mark.timeout(240)


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


def read_all(settings: Settings, role: str) -> list:
    return read_topic(settings.kafka_bootstrap, settings.topic(role))


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


def test_duplicates_conflicts_orphans_and_poison(ledger_topics: Settings, tmp_path: Path):
    s = ledger_topics
    port = free_port()
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log", metrics_port=port)
    try:
        producer = EventProducer(s, s.kafka_bootstrap)
        first = intent(key="acme/refund/A")
        duplicate = intent(key="acme/refund/A")
        conflict = intent(key="acme/refund/A", args={"amount": 1})
        after_poison = intent(key="acme/refund/B")
        producer.send("intents", first)
        producer.send_raw("intents", b"acme/refund/G", b"garbage")
        producer.send_raw("attempts", b"acme/refund/G", b"\xc3\x01\x00\x00\x00\x00\x00\x00\x00")
        producer.send("intents", duplicate)
        producer.send("intents", conflict)
        producer.send("attempts", outcome(ev.OutcomeStatus.SUCCEEDED, key="acme/refund/NOPE"))
        producer.send("intents", after_poison)
        producer.flush()

        ids = {first.event_id, duplicate.event_id, conflict.event_id, after_poison.event_id}
        by_intent = {r.intent_event_id: r for r in receipts_for(s, ids, proc=proc)}
        assert by_intent[first.event_id].status is ev.ReceiptStatus.ACCEPTED
        assert by_intent[duplicate.event_id].status is ev.ReceiptStatus.ACCEPTED
        assert by_intent[duplicate.event_id].args_hash == first.args_hash
        assert (by_intent[conflict.event_id].status, by_intent[conflict.event_id].reason) == (
            ev.ReceiptStatus.REJECTED, ev.Reason.CONFLICT)
        assert by_intent[after_poison.event_id].status is ev.ReceiptStatus.ACCEPTED

        dispatches = [d for d in read_all(s, "dispatch") if isinstance(d, ev.Dispatch)]
        assert sorted(d.key for d in dispatches) == ["acme/refund/A", "acme/refund/B"]
        assert next(d for d in dispatches if d.key == "acme/refund/A").args_hash == \
            first.args_hash

        alerts = read_topic(s.kafka_bootstrap, s.topic("alerts"),
                            until=lambda a: len(a) >= 4, timeout_s=30)
        kinds = sorted(a.kind.value for a in alerts)
        assert kinds == ["conflicting_arguments", "effect_without_intent", "poison_input",
                         "poison_input"]
        dead = read_all(s, "dlq")
        assert {d.topic for d in dead} == {s.topic("intents"), s.topic("attempts")}
        assert all(d.reason.startswith("undecodable") and d.key == b"acme/refund/G"
                   for d in dead)
        assert proc.alive()

        m = scrape(port)
        assert m['ledger_decisions_total{event="Intent",outcome="accepted"}'] == 2
        assert m['ledger_decisions_total{event="Intent",outcome="conflict"}'] == 1
        assert m["ledger_duplicates_suppressed_total"] == 1
        assert m["ledger_conflicts_total"] == 1
        assert m['ledger_alerts_total{kind="poison_input"}'] == 2
        assert m['ledger_alerts_total{kind="effect_without_intent"}'] == 1
        dlq_intents = "ledger_dlq_total{topic=\"" + s.topic("intents") + "\"}"
        assert m[dlq_intents] == 1
        assert m["ledger_decision_seconds_count"] == 7
    finally:
        assert proc.stop() == 0, proc.tail()


def _workload(keys: int, duplicate_share: float, seed: int) -> list[ev.Intent]:
    rng = random.Random(seed)
    originals = [intent(key=f"acme/pay/k{i}", args={"amount": i}) for i in range(keys)]
    events = list(originals)
    for original in rng.sample(originals, int(keys * duplicate_share)):
        events.append(intent(key=original.key, args={"amount": int(original.key[10:])}))
    rng.shuffle(events)
    return events


def _expected_receipts(settings: Settings, events: list[ev.Intent]) -> dict[str, ev.Receipt]:
    """The receipts a crash-free run gives: the pure core over each key's events in order."""
    policy = policy_from(settings)
    states: dict[str, object] = {}
    expected: dict[str, ev.Receipt] = {}
    for event in events:
        state = states.get(event.key) or absent(event.key)
        decision = decide(state, event, policy)  # type: ignore[arg-type]
        states[event.key] = decision.state
        for out in decision.outputs:
            if isinstance(out, ev.Receipt):
                expected[out.receipt_id] = out
    return expected


def _assert_one_dispatch_per_key(settings: Settings) -> None:
    dispatch_ids: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for d in read_all(settings, "dispatch"):
        if isinstance(d, ev.Dispatch):
            dispatch_ids[d.key].add((d.dispatch_id, d.attempt))
    doubled = {k: v for k, v in dispatch_ids.items() if len(v) != 1}
    assert not doubled, f"keys dispatched with different attempt ids: {list(doubled)[:5]}"


def test_sigkill_mid_stream_recovers_state_from_the_changelog(ledger_topics: Settings,
                                                               tmp_path: Path):
    s = ledger_topics
    events = _workload(keys=1500, duplicate_share=0.3, seed=7)
    producer = EventProducer(s, s.kafka_bootstrap)
    for event in events:
        producer.send("intents", event)
    producer.flush()

    first = start_processor(s, tmp_path / "state-1", tmp_path / "processor-1.log")
    try:
        read_topic(s.kafka_bootstrap, s.topic("receipts"), timeout_s=90,
                   until=lambda rs: len(rs) >= len(events) // 4)
    finally:
        first.kill()
    decided_before_kill = {r.intent_event_id for r in read_all(s, "receipts")}
    assert len(decided_before_kill) < len(events), "the kill came after the last decision"
    # A fresh state folder: everything the restarted processor knows comes from the changelog.
    second = start_processor(s, tmp_path / "state-2", tmp_path / "processor-2.log")
    try:
        receipts = receipts_for(s, {e.event_id for e in events}, proc=second)
    finally:
        assert second.stop() == 0, second.tail()

    seen = {r.receipt_id: r for r in receipts}
    expected = _expected_receipts(s, events)
    assert seen == expected
    _assert_one_dispatch_per_key(s)


def test_two_processors_share_partitions_and_survive_one_being_killed(
        ledger_topics: Settings, tmp_path: Path):
    s = ledger_topics
    producer = EventProducer(s, s.kafka_bootstrap)
    batch_1 = [intent(key=f"acme/pay/k{i}", args={"amount": i}) for i in range(300)]
    a = start_processor(s, tmp_path / "state-a", tmp_path / "a.log")
    b = start_processor(s, tmp_path / "state-b", tmp_path / "b.log")
    try:
        for event in batch_1:
            producer.send("intents", event)
        producer.flush()
        receipts_for(s, {e.event_id for e in batch_1}, proc=a)
        a.kill()
        # Duplicates of every key (whichever processor owned it) plus new keys.
        batch_2 = [intent(key=e.key, args={"amount": i}) for i, e in enumerate(batch_1)]
        batch_2 += [intent(key=f"acme/pay/new{i}") for i in range(100)]
        for event in batch_2:
            producer.send("intents", event)
        producer.flush()
        receipts = receipts_for(s, {e.event_id for e in batch_2}, proc=b)
    finally:
        a.kill()
        assert b.stop() == 0, b.tail()

    by_intent = {r.intent_event_id: r for r in receipts}
    for event in batch_2[:300]:
        receipt = by_intent[event.event_id]
        assert receipt.status is ev.ReceiptStatus.ACCEPTED and receipt.attempts == 1
    _assert_one_dispatch_per_key(s)
    keys = {d.key for d in read_all(s, "dispatch") if isinstance(d, ev.Dispatch)}
    assert len(keys) == 400


def test_exactly_once_mode_decides_the_same(ledger_topics: Settings, tmp_path: Path):
    s = ledger_topics
    events = _workload(keys=200, duplicate_share=0.3, seed=11)
    producer = EventProducer(s, s.kafka_bootstrap)
    for event in events:
        producer.send("intents", event)
    producer.flush()
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log",
                           "--guarantee", "exactly-once")
    try:
        receipts = receipts_for(s, {e.event_id for e in events}, proc=proc)
    finally:
        assert proc.stop() == 0, proc.tail()
    assert {r.receipt_id: r for r in receipts} == _expected_receipts(s, events)
    _assert_one_dispatch_per_key(s)
