"""Defect 10, zombie processors: a processor paused past its session timeout while it holds
a batch (SIGSTOP), whose partitions another processor took over, is resumed (SIGCONT).

Exactly once, it must never make a key's latest receipt older than the key's state: on
``ledger.receipts`` read with read_committed (what compaction keeps), every key's latest
receipt states the key's final status as the pure core computes it from the key's inputs,
before and after compaction; no attempt is granted twice; the zombie logs why it dropped its
stale batch (one line, no traceback) and lives on.

At least once does not fence zombies (a stale batch's records are on the topics before its
commit fails), so that variant asserts only that the zombie survives without a traceback.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ledger_lab.harness.processes import Proc, start_processor
from ledger_lab.local_kafka import LocalCluster, ensure_jars, jar_cache
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json
from ledger_stream.domain.outputs import key_status
from ledger_stream.kafka.producer import EventProducer, producer_config
from ledger_stream.kafka.topics import ledger_topics
from tests.processor.support import CODEC, log_lines, model_states, read_raw, wait_for

pytestmark = pytest.mark.timeout(600)  # above the waits it adds up (so theirs report first)

FAST_COMPACTION = {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
                   "delete.retention.ms": "100"}
PAUSE_S = 10.0  # longer than the processors' session timeout (6 s, see start_processor)
LEASE_MS = 600_000  # no lease ends during the test: no deadline changes a key


@pytest.fixture(scope="module")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker of this module's own. Compaction is asserted here, and a broker's one log
    cleaner works through the dirtiest logs first: on the suite's shared broker it can be busy
    for minutes with earlier tests' compacted topics (seen: no compaction within 150 s). Its
    folder is pytest's, so a failed wait can quote what the cleaner logged."""
    global BROKER_DIR
    settings = Settings()
    libs = ensure_jars(jar_cache(settings), settings.kafka_version, progress=lambda _: None)
    cluster = LocalCluster(tmp_path_factory.mktemp("zombie-kafka"), progress=lambda _: None)
    try:
        status = cluster.start(libs, settings.kafka_version, nodes=1)
        assert status.bootstrap is not None
        BROKER_DIR = cluster.cluster_dir
        yield status.bootstrap
    finally:
        cluster.stop()


BROKER_DIR: Path | None = None


def cleaner_lines() -> str:
    """The module broker's log lines about cleaning (its configuration, and any cleaner
    warning such as a partition marked uncleanable), for a failed wait."""
    if BROKER_DIR is None:
        return ""
    lines = [line for log in sorted(BROKER_DIR.glob("node-*/broker.log"))
             for line in log.read_text(errors="replace").splitlines()
             if "clean" in line.lower() and "Cleaning LogSegment" not in line]
    return "\n".join(lines[-40:])


@pytest.fixture
def compacting_topics(ledger_settings: Settings) -> Iterator[Settings]:
    """The ledger topics, receipts created to compact within seconds."""
    s = ledger_settings
    admin = AdminClient({"bootstrap.servers": s.kafka_bootstrap})
    specs = [NewTopic(spec.name, spec.partitions, 1, config={
        **spec.config, **(FAST_COMPACTION if spec.name == s.topic("receipts") else {})})
        for spec in ledger_topics(s)]
    for future in admin.create_topics(specs).values():
        future.result(30)
    yield s
    for future in admin.delete_topics([spec.topic for spec in specs]).values():
        future.result(30)


class Load(threading.Thread):
    """An agent and a connector in one thread: intents for new keys at a steady rate, a
    claim for each key's first Dispatch, a success for the Grant of that claim. A key's
    inputs are produced in causal order (its claim once its dispatch is visible, its outcome
    once its grant is), so the processor decides them in that order and the test's model
    replays them in it."""

    def __init__(self, settings: Settings, keys_per_s: int) -> None:
        super().__init__(daemon=True)
        self.settings = settings
        self.rate = keys_per_s
        self.inputs: dict[str, list[ev.InputEvent]] = defaultdict(list)
        self.claimed: set[str] = set()
        self.settled: set[str] = set()
        self.no_new_keys = threading.Event()
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self._run_id = uuid.uuid4().hex[:6]

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def finished(self) -> bool:
        return self.no_new_keys.is_set() and len(self.settled) == len(self.inputs)

    def _run(self) -> None:
        s = self.settings
        producer = EventProducer(s, s.kafka_bootstrap)
        dispatch = Consumer({"bootstrap.servers": s.kafka_bootstrap,
                             "group.id": f"load-{uuid.uuid4().hex}",
                             "isolation.level": "read_committed", "enable.auto.commit": False})
        dispatch.assign([TopicPartition(s.topic("dispatch"), p, OFFSET_BEGINNING)
                         for p in range(s.partitions)])
        per_step, step_s, due = max(1, self.rate // 20), 0.05, time.monotonic()
        try:
            while not self.halt.is_set():
                if not self.no_new_keys.is_set() and time.monotonic() >= due:
                    for _ in range(per_step):
                        self._intent(producer)
                    due += step_s
                for msg in dispatch.consume(500, timeout=0.02):
                    if not msg.error():
                        self._answer(producer, CODEC.decode(msg.value()))
                producer.flush()
        finally:
            dispatch.close()
            producer.close()

    def _send(self, producer: EventProducer, role: str, event: ev.InputEvent) -> None:
        self.inputs[event.key].append(event)  # type: ignore[union-attr]
        producer.send(role, event)

    def _intent(self, producer: EventProducer) -> None:
        n = len(self.inputs)
        key = f"acme/pay/z{self._run_id}-{n}"
        args = {"amount": n}
        self._send(producer, "intents", ev.Intent(
            event_id=f"intent-{key}", key=key, tenant="acme", action="pay", target="t",
            args_json=canonical_json(args), args_hash=args_hash(args),
            workflow=ev.Workflow("zombie-test", "1.0"), at_ms=_now()))

    def _answer(self, producer: EventProducer, out: object) -> None:
        if isinstance(out, ev.Dispatch) and out.attempt == 1 and out.key not in self.claimed:
            self.claimed.add(out.key)
            # Fenced when pre-granted (exactly once), as a connector that fenced the live
            # record claims; a plain claim would be held until the pre-grant's end.
            self._send(producer, "attempts", ev.AttemptClaim(
                f"claim-{out.key}", out.key, 1, f"c-{out.key}", "conn", LEASE_MS, _now(),
                out.lease_until_ms > 0))
        elif isinstance(out, ev.Grant) and out.claim_id == f"c-{out.key}" \
                and out.key not in self.settled:
            self.settled.add(out.key)
            self._send(producer, "attempts", ev.AttemptOutcome(
                f"outcome-{out.key}", out.key, 1, out.claim_id, ev.OutcomeStatus.SUCCEEDED,
                _now(), f"ext-{out.key}"))


def _now() -> int:
    return int(time.time() * 1000)


def _members(s: Settings) -> list[int]:
    """How many input partitions each member of the processors' group holds, as the group
    coordinator says (empty while the group rebalances)."""
    group = f"{s.topic_prefix}-processor"
    admin = AdminClient({"bootstrap.servers": s.kafka_bootstrap})
    found = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    if str(found.state).rsplit(".", 1)[-1] != "STABLE":
        return []
    inputs = {s.topic("intents"), s.topic("attempts")}
    return sorted(sum(tp.topic in inputs for tp in m.assignment.topic_partitions)
                  for m in found.members)


def _pause_a_busy_processor(s: Settings, tmp_path: Path, guarantee: str
                            ) -> tuple[Load, Proc, Proc]:
    """A under load, B joins, A is stopped past its session, B takes over, A resumes.
    Each step waits on what the broker shows (group members, settled keys). On a failure
    the processes and the load are stopped before the error propagates."""
    load = Load(s, keys_per_s=150)
    procs: list[Proc] = []
    try:
        return _pause(s, tmp_path, guarantee, load, procs)
    except BaseException:
        load.halt.set()
        for proc in procs:
            if proc.alive():
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
        raise


def _pause(s: Settings, tmp_path: Path, guarantee: str, load: Load, procs: list[Proc]
           ) -> tuple[Load, Proc, Proc]:
    everything = 2 * s.partitions
    a = start_processor(s, tmp_path / "state-a", tmp_path / "a.log", "--guarantee", guarantee)
    procs.append(a)
    load.start()
    wait_for("A to settle keys", lambda: len(load.settled) >= 100, 60, [a])
    b = start_processor(s, tmp_path / "state-b", tmp_path / "b.log", "--guarantee", guarantee)
    procs.append(b)
    wait_for("A and B to share the partitions",
             lambda: len(_members(s)) == 2 and sum(_members(s)) == everything, 60, [a, b])
    settled = len(load.settled)
    wait_for("both to make progress", lambda: len(load.settled) >= settled + 150, 60, [a, b])
    os.kill(a.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        wait_for("B to take every partition over", lambda: _members(s) == [everything],
                 60, [b])
        settled = len(load.settled)
        wait_for("B to make progress alone", lambda: len(load.settled) >= settled + 50,
                 60, [b])
        time.sleep(max(0.0, PAUSE_S - (time.monotonic() - stopped)))  # the pause itself
    finally:
        os.kill(a.pid, signal.SIGCONT)
    wait_for("A to rejoin", lambda: len(_members(s)) == 2, 90, [a, b])
    settled = len(load.settled)
    wait_for("both to make progress again", lambda: len(load.settled) >= settled + 150,
             60, [a, b])
    return load, a, b


def _decided_everything(s: Settings) -> bool:
    """The group has committed every input record there is now but the processors' Ticks.

    Committed offsets alone cannot say it: a quiet attempts partition gets a Tick every
    tick interval, in a transaction whose marker takes an offset after it and is never
    delivered, so the group commits up to the Tick and the partition's end stays one past.
    Whatever lies between the committed offset and the end must be Ticks (a CI run timed
    out here when its first look came after the first Tick of the quiet)."""
    consumer = Consumer({"bootstrap.servers": s.kafka_bootstrap,
                         "group.id": f"{s.topic_prefix}-processor",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        tps = [TopicPartition(s.topic(role), p) for role in ("intents", "attempts")
               for p in range(s.partitions)]
        committed = consumer.committed(tps, timeout=10)
        ends = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=10)[1]
                for tp in tps}
        behind = [tp for tp in committed if tp.offset < ends[(tp.topic, tp.partition)]]
        if any(tp.offset < 0 for tp in behind):
            return False  # nothing committed yet where records are
        if not behind:
            return True
        consumer.assign(behind)
        deadline = time.monotonic() + 10
        while any(tp.offset < ends[(tp.topic, tp.partition)]
                  for tp in consumer.position(behind)):
            if time.monotonic() > deadline:
                return False
            for msg in consumer.consume(500, timeout=0.2):
                if not msg.error() and not isinstance(CODEC.decode(msg.value()), ev.Tick):
                    return False
        return True
    finally:
        consumer.close()


def _latest_receipts(s: Settings) -> tuple[dict[str, ev.Receipt], Counter[str]]:
    """Each key's latest receipt by offset (read_committed), and how many receipt records
    each key has."""
    latest: dict[str, ev.Receipt] = {}
    per_key: Counter[str] = Counter()
    for raw in read_raw(s.kafka_bootstrap, s.topic("receipts")):
        receipt = raw.event()
        if isinstance(receipt, ev.Receipt):
            latest[receipt.key] = receipt
            per_key[receipt.key] += 1
    return latest, per_key


def _assert_latest_receipts_state_the_model(s: Settings, load: Load) -> None:
    expected = {key: key_status(state) for key, state in model_states(s, load.inputs).items()}
    latest, _ = _latest_receipts(s)
    assert latest.keys() == expected.keys()
    stale = {key: (latest[key].key_status.value, want.value)
             for key, want in expected.items() if latest[key].key_status is not want}
    assert not stale, f"{len(stale)} keys whose latest receipt is stale: " \
                      f"{list(stale.items())[:5]}"


def _assert_no_processor_failed(a: Proc, b: Proc) -> None:
    assert a.alive() and b.alive()
    for proc in (a, b):
        assert not log_lines(proc, "Traceback|CheckpointConsumerCommitError"), proc.tail(60)


def _force_compaction(s: Settings) -> None:
    """Roll the receipts segments (a record after segment.ms closes the active one) until
    the cleaner has compacted all of them: every key down to one receipt.

    The end state, not a drop in the record count: the cleaner also works while the load
    runs, and the log it has already compacted by the time the wait starts may have fewer
    records left to remove than the rolling records add (the way this wait failed, twice,
    when it compared counts)."""
    roller = Producer(producer_config(s.kafka_bootstrap))
    left: list[Counter[str]] = []

    def compacted() -> bool:
        for partition in range(s.partitions):
            roller.produce(s.topic("receipts"), key=b"~roll", value=b"x", partition=partition)
        roller.flush(10)
        per_key = _latest_receipts(s)[1]
        left[:] = [per_key]
        return max(per_key.values(), default=1) == 1

    try:
        # The cleaner looks for work every 15 s (log.cleaner.backoff.ms) and cannot clean
        # past a transaction still open (the zombie's, until its 10 s timeout aborts it).
        wait_for("every key of the receipts topic to be compacted to one receipt",
                 compacted, 240, every_s=1.0)
    except AssertionError as exc:
        extra = sum(n - 1 for n in left[0].values()) if left else "?"
        raise AssertionError(f"{exc}\n{extra} receipts left above one per key; the broker's "
                             f"cleaner said:\n{cleaner_lines()}") from None


def test_a_zombie_never_makes_a_latest_receipt_stale(compacting_topics: Settings,
                                                     tmp_path: Path) -> None:
    s = compacting_topics
    load, a, b = _pause_a_busy_processor(s, tmp_path, "exactly-once")
    try:
        load.no_new_keys.set()
        wait_for("every key to settle", load.finished, 120, [a, b])
        wait_for("every input to be decided", lambda: _decided_everything(s), 120, [a, b])
        assert load.error is None, load.error
        _assert_no_processor_failed(a, b)
        # The zombie says once why its stale batch went: it tried to commit and was fenced
        # ("batch abandoned"), or, when librdkafka saw the session expire before the next
        # commit, its partitions were taken back first ("partitions lost").
        abandoned = log_lines(a, "batch abandoned: ")
        lost = log_lines(a, r"partitions lost \(session expired\)")
        assert len(abandoned) <= 1 and (abandoned or lost), a.tail(60)
    finally:
        load.halt.set()
        load.join(30)
        codes = (a.stop(), b.stop())
    assert codes == (0, 0), (a.tail(), b.tail())

    dispatch = [r.event() for r in read_raw(s.kafka_bootstrap, s.topic("dispatch"))]
    grants = Counter((g.key, g.attempt) for g in dispatch if isinstance(g, ev.Grant))
    assert grants and max(grants.values()) == 1, grants.most_common(3)
    dispatches = Counter(d.dispatch_id for d in dispatch if isinstance(d, ev.Dispatch))
    assert len(dispatches) == len(load.inputs) and max(dispatches.values()) == 1
    _assert_latest_receipts_state_the_model(s, load)
    _force_compaction(s)
    _assert_latest_receipts_state_the_model(s, load)


def test_at_least_once_zombie_survives_without_a_traceback(compacting_topics: Settings,
                                                          tmp_path: Path) -> None:
    """At least once does not fence a zombie: nothing is asserted about stale receipts."""
    s = compacting_topics
    load, a, b = _pause_a_busy_processor(s, tmp_path, "at-least-once")
    try:
        assert load.error is None, load.error
        _assert_no_processor_failed(a, b)
    finally:
        load.halt.set()
        load.join(30)
        codes = (a.stop(), b.stop())
    assert codes == (0, 0), (a.tail(), b.tail())
