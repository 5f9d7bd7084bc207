"""``ledger-stream repartition --to N``: grow the ledger's topics with every key's state.

With every processor stopped, in steps that are each safe to run again (a crash anywhere
leaves a state the next run finishes; the recorded layout, written last, is the marker):

1. refuse unless a layout is recorded (kafka/layout.py), N is larger than it, no member is
   in the processors' consumer group, and every input partition of the recorded layout is
   decided (the group's committed offsets at the partition's end); say what is not; and,
   once the state is read, that no key it would move holds a pre-grant its fencer may still
   claim (operate/pregrants.py: a claim forwarded from the old partition loses its time).
   Topics grown already (by hand, or by a run that crashed) cannot be decided at the old count any
   more: what waits there is decided after the cut-over, forwarded to its key's partition
   when it moved (a processor forwards what a producer placed under the previous count);
2. carry the freezes and held keys (operate/carry.py): each partition's containment row at
   the new layout, its held entries moved with their keys; refuse when the partitions
   disagree on the freezes in force. A carried row is marked with the count it was carried
   from, so a re-run after a crash reads each old partition's own row, not the carried one;
3. grow every ledger topic to N (``create_partitions``; topics already at N are left);
4. rewrite, for every key whose partition moves (``murmur2(key) % N``), its latest committed
   changelog row into the changelog partition of its new home, with its deadline basis, so
   the new owner restores it and its deadlines; and each new partition's clock from the
   partition its keys came from (deadlines are judged by it);
5. record the layout ``N`` (grown from the recorded count). Processors restore from then on
   only the rows homed in their partition at ``N`` (the moved keys' old rows stay behind in
   the changelog, skipped), and rebuild a local store built under the old layout.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from ledger_stream.config import Settings
from ledger_stream.failpoints import failpoint
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer, Producer
from ledger_stream.kafka.layout import Layout, read_layout, topic_counts, write_layout
from ledger_stream.kafka.message import fetched
from ledger_stream.kafka.offsets import committed_offsets
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.topics import LEDGER_TOPICS
from ledger_stream.operate.carry import CarryRefused, carried_rows
from ledger_stream.operate.pregrants import running_pregrants
from ledger_stream.processor import changelog as cl

SPECIAL = (cl.CLOCK_KEY, cl.CONTAINMENT_KEY.encode(), cl.TICK_KEY, b"~layout")
# On a containment row this migration wrote: the partition count it carried it from.
CARRIED = "ledger.carried-from"


class RepartitionRefused(Exception):
    """The migration cannot run now; the message says what to do first."""


@dataclass
class RepartitionReport:
    before: int
    after: int
    moved_keys: int = 0
    kept_keys: int = 0
    clocks: dict[int, int] = field(default_factory=dict)


@dataclass
class _Partition:
    rows: dict[bytes, tuple[bytes, bytes | None]] = field(default_factory=dict)
    clock: int = 0
    containment: bytes | None = None  # the latest containment row, as stored


def repartition(bootstrap: str, settings: Settings, to: int, timeout_s: float = 30.0,
                say: Callable[[str], None] = print) -> RepartitionReport:
    """Move the ledger to ``to`` partitions (module docstring). RepartitionRefused when a
    step's condition does not hold; nothing was changed then, or only what a re-run redoes."""
    changelog, group = settings.topic("changelog"), settings.processor.consumer_group
    recorded = read_layout(bootstrap, changelog, timeout_s)
    if recorded is None:
        raise RepartitionRefused(f"no partition layout recorded in {changelog}: start a "
                                 "processor once (it records the count it was built under)")
    counts = topic_counts(bootstrap, [settings.topic(r) for r in LEDGER_TOPICS], timeout_s)
    if recorded.partitions == to:
        say(f"already at {to} partitions")
        return RepartitionReport(to, to)
    if to < recorded.partitions or any(n > to for n in counts.values()):
        raise RepartitionRefused(f"only growing is supported: the state is at "
                                 f"{recorded.partitions}, topics {counts}, asked {to}")
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    _require_no_members(admin, group, timeout_s)
    committed = _committed(bootstrap, settings, recorded.partitions, timeout_s)
    checked_ms = int(time.time() * 1000)  # before the check: what it reads was appended
    grown = any(n != recorded.partitions for n in counts.values())
    if not grown:
        _require_decided(bootstrap, settings, committed, timeout_s)
    else:
        # Grown already (by hand, or by a run that crashed): the processors cannot run at
        # the old count any more. What waits on the old partitions is decided after the
        # cut-over at its key's partition, forwarded there when it moved (processor/step.py).
        say("topics already grown: inputs still waiting are decided after the cut-over")
    parts = _read_state(bootstrap, changelog, group, committed, recorded.partitions,
                        timeout_s)
    if not grown:
        _require_no_running_pregrant(parts, to, checked_ms,
                                     2 * settings.processor.clock_skew_ms)
    try:
        containment = carried_rows({p: part.containment for p, part in parts.items()}, to)
    except CarryRefused as exc:
        raise RepartitionRefused(str(exc)) from exc
    _grow(admin, {name: n for name, n in counts.items() if n < to}, to, timeout_s)
    say(f"topics at {to} partitions")
    report = _rewrite(bootstrap, changelog, group, parts, to, timeout_s,
                      (containment, recorded.partitions))
    report.before = recorded.partitions
    failpoint("repartition_before_layout")  # tests: a crash with every row written
    write_layout(bootstrap, changelog, Layout(to, grown_from=recorded.partitions), timeout_s)
    say(f"moved {report.moved_keys} keys ({report.kept_keys} stay); layout recorded: {to}")
    return report


def _require_no_members(admin: AdminClient, group: str, timeout_s: float) -> None:
    try:
        [described] = admin.describe_consumer_groups([group],
                                                     request_timeout=timeout_s).values()
        members = described.result(timeout_s).members
    except KafkaException as exc:
        raise RepartitionRefused(f"cannot describe the group {group}: {exc}") from exc
    if members:
        who = ", ".join(sorted(m.client_id or m.member_id for m in members))
        raise RepartitionRefused(f"processors are running in group {group} ({who}): stop "
                                 "every processor first")


def _require_no_running_pregrant(parts: dict[int, _Partition], to: int, checked_ms: int,
                                 margin_ms: int) -> None:
    running = running_pregrants(((p, key, row) for p, part in parts.items()
                                 for key, (row, _) in part.rows.items()), to, checked_ms,
                                margin_ms)
    if running:
        until_ms = max(end for _, end in running) + margin_ms + 1
        when = datetime.fromtimestamp(until_ms / 1000, UTC).isoformat(timespec="seconds")
        wait_s = max(0, -(-(until_ms - checked_ms) // 1000))
        named = ", ".join(key for key, _ in running[:6])
        more = f" and {len(running) - 6} more" if len(running) > 6 else ""
        raise RepartitionRefused(
            f"{len(running)} key(s) that would move hold a pre-grant their connector may still "
            f"claim ({named}{more}): a claim forwarded from the old partition would lose the "
            f"time it was written at. Run this again after {when} (in {wait_s} s: the latest "
            "pre-grant's end plus twice LEDGER_CLOCK_SKEW_MS)")


def _consumer(bootstrap: str, group: str, isolation: str = "read_committed") -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG, "group.id": group,
                     "enable.auto.commit": False, "isolation.level": isolation,
                     "auto.offset.reset": "earliest"})


def _committed(bootstrap: str, settings: Settings, partitions: int, timeout_s: float
               ) -> dict[int, cl.Positions]:
    """The processors' committed input offsets per partition (-1: none)."""
    inputs = (settings.topic("intents"), settings.topic("attempts"))
    reader = _consumer(bootstrap, settings.processor.consumer_group)  # never subscribes: no member
    try:
        tps = [TopicPartition(t, p) for p in range(partitions) for t in inputs]
        found = {(tp.topic, tp.partition): tp.offset
                 for tp in committed_offsets(reader, tps, timeout_s)}
    finally:
        reader.close()
    return {p: cl.Positions(max(found[(inputs[0], p)], -1), max(found[(inputs[1], p)], -1))
            for p in range(partitions)}


def _require_decided(bootstrap: str, settings: Settings,
                     committed: dict[int, cl.Positions], timeout_s: float) -> None:
    """Refuse naming every input partition with a record beyond the committed offsets."""
    reader = _consumer(bootstrap, f"ledger-repartition-{uuid.uuid4().hex}")
    waiting = []
    try:
        for role in ("intents", "attempts"):
            topic = settings.topic(role)
            for p, pos in committed.items():
                start = pos.intents if role == "intents" else pos.attempts
                if _records_after(reader, topic, p, start, timeout_s):
                    waiting.append(f"{topic}[{p}]")
    finally:
        reader.close()
    if waiting:
        raise RepartitionRefused(
            f"inputs not decided yet in {', '.join(waiting)}: start the processors (on the "
            "topics as they are, before growing them) until their lag is 0, stop them, "
            "then run this again")


def _records_after(reader: Consumer, topic: str, partition: int, start: int,
                   timeout_s: float) -> bool:
    """Whether a committed record other than a Tick lies at or after ``start`` (-1: the
    beginning)."""
    low, high = reader.get_watermark_offsets(TopicPartition(topic, partition),
                                             timeout=timeout_s)
    start = max(start, low)
    if start >= high:
        return False
    reader.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for msg in fetched(reader, 100, 1.0):
                # A Tick only moves the partition clock: the new owner ticks on its own.
                if not msg.error() and msg.key() != cl.TICK_KEY:
                    return True
            [at] = reader.position([TopicPartition(topic, partition)])
            if at.offset >= high:  # only transaction markers were left
                return False
    finally:
        reader.unassign()
    raise RepartitionRefused(f"{topic}[{partition}] could not be read to its end in "
                             f"{timeout_s:g} s (an open transaction?): run this again")


def _read_state(bootstrap: str, changelog: str, group: str,
                committed: dict[int, cl.Positions], old: int, timeout_s: float
                ) -> dict[int, _Partition]:
    """Each old partition's latest committed row per key, clock and containment, as a
    restore from scratch would apply them; a containment row carried from ``old`` by a run
    that crashed is passed over (the partition's own row is what to carry)."""
    carried = str(old).encode()
    reader = _consumer(bootstrap, f"ledger-repartition-{uuid.uuid4().hex}")
    parts = {p: _Partition() for p in committed}
    try:
        for p, part in parts.items():
            _, high = reader.get_watermark_offsets(TopicPartition(changelog, p),
                                                   timeout=timeout_s)
            if high == 0:
                continue
            reader.assign([TopicPartition(changelog, p, OFFSET_BEGINNING)])
            quiet_until = time.monotonic() + timeout_s  # no record for this long: give up
            while reader.position([TopicPartition(changelog, p)])[0].offset < high:
                if time.monotonic() > quiet_until:
                    raise RepartitionRefused(f"{changelog}[{p}] could not be read to its end "
                                             f"in {timeout_s:g} s: run this again")
                found = fetched(reader, 5000, 1.0)
                if found:
                    quiet_until = time.monotonic() + timeout_s
                for msg in found:
                    if msg.error():
                        raise KafkaException(msg.error())
                    if msg.key() == cl.CONTAINMENT_KEY.encode() \
                            and (CARRIED, carried) in (msg.headers() or []):
                        continue
                    _take(part, msg.key(), msg.value(), msg.headers(), group, committed[p])
            reader.unassign()
    finally:
        reader.close()
    return parts


def _take(part: _Partition, key: bytes | None, value: bytes | None, headers: object,
          group: str, committed: cl.Positions) -> None:
    record = cl.parse(0, key, value, headers)  # type: ignore[arg-type]
    if record.group != group or value is None or not record.positions.covered_by(committed):
        return  # not this group's, or of a batch never committed: restore skips it too
    if record.key == cl.CLOCK_KEY:
        part.clock = max(part.clock, int(value))
    elif record.key == cl.CONTAINMENT_KEY.encode():
        part.containment = value
    elif record.key not in SPECIAL:
        part.rows[record.key] = (value, record.due)


def _grow(admin: AdminClient, topics: dict[str, int], to: int, timeout_s: float) -> None:
    if not topics:
        return
    futures = admin.create_partitions([NewPartitions(name, to) for name in topics],
                                      operation_timeout=timeout_s, request_timeout=timeout_s)
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            raise RepartitionRefused(f"growing {name} failed: {exc.args[0].str()}") from exc


def _await_partitions(producer: Producer, topic: str, to: int, timeout_s: float) -> None:
    """Until ``producer`` knows ``topic`` at ``to`` partitions: partitions created a moment
    ago may be missing from a new client's metadata ("Unknown partition" on produce)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = producer.list_topics(topic, timeout=min(5.0, timeout_s)).topics.get(topic)
        except KafkaException:
            found = None
        if found is not None and found.error is None and len(found.partitions) >= to:
            return
        if time.monotonic() > deadline:
            raise RepartitionRefused(f"{topic} did not show {to} partitions within "
                                     f"{timeout_s:g} s: run this again")
        time.sleep(0.2)


def _rewrite(bootstrap: str, changelog: str, group: str, parts: dict[int, _Partition],
             to: int, timeout_s: float, containment: tuple[dict[int, bytes], int]
             ) -> RepartitionReport:
    """Write each moved key's row at its new home, the clocks of the new homes and the
    carried containment rows (``containment``: rows by partition, the count carried from)."""
    producer = Producer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "enable.idempotence": True, "acks": "all"})
    errors: list[str] = []

    def delivered(error: object, _msg: object) -> None:
        if error is not None:
            errors.append(str(error))

    _await_partitions(producer, changelog, to, timeout_s)
    # (-1, -1): covered by any committed offsets, so the new owner applies them.
    headers = cl.headers(group, cl.Positions())
    report = RepartitionReport(0, to)
    clocks: dict[int, int] = {}
    for p, part in parts.items():
        for key, (row, due) in part.rows.items():
            home = partition_for(key, to)
            if home == p:
                report.kept_keys += 1
                continue
            report.moved_keys += 1
            row_headers: list[tuple[str, str | bytes | None]] = [*headers]
            if due is not None:
                row_headers.append((cl.DUE, due))
            producer.produce(changelog, row, key, home, headers=row_headers,
                             on_delivery=delivered)
            if part.clock:
                clocks[home] = max(clocks.get(home, 0), part.clock)
            producer.poll(0)
    for home, clock in clocks.items():
        producer.produce(changelog, cl.clock_value(clock), cl.CLOCK_KEY, home,
                         headers=list(headers), on_delivery=delivered)
    rows, carried_from = containment
    marked: list[tuple[str, str | bytes | None]] = [*headers,
                                                     (CARRIED, str(carried_from).encode())]
    for home, row in rows.items():
        producer.produce(changelog, row, cl.CONTAINMENT_KEY.encode(), home, headers=marked,
                         on_delivery=delivered)
    if producer.flush(timeout_s) or errors:
        raise RepartitionRefused(f"writing the moved rows failed ({errors[:1] or 'no answer'})"
                                 ": run this again")
    report.clocks = clocks
    return report
