"""The partition layout the ledger's state was built under, recorded beside the state.

One operation key's intents, attempts, dispatches and state meet in partition
``murmur2(key) % N``. Grow the topics to another N and the same key lands in another
partition: a processor would find no state there and decide the key as new (a second
dispatch). So the layout is recorded once, with the state: a record keyed ``~layout`` in
partition 0 of the changelog (compaction keeps the latest), whose value names the partition
count and the key-to-partition function (:data:`PARTITIONER`). It carries none of the
processor's batch headers, so restore skips it as foreign.

``ledger-stream topics create`` and the first processor of a deployment write it; every
processor, connector and the view compare the topics they use against it at start and
refuse (:class:`LayoutRefused`) when a count differs, naming the migration
(``ledger-stream repartition --to N``), which is the only writer that changes it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer, Producer
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.kafka.message import fetched
from ledger_stream.kafka.reach import StopRequested, keep_asking, wait_in_slices

logger = logging.getLogger(__name__)

LAYOUT_KEY = b"~layout"
LAYOUT_PARTITION = 0  # the one partition every count has
PARTITIONER = "murmur2"  # Kafka's default: (murmur2(key) & 0x7fffffff) % partitions


class LayoutRefused(KafkaSetupError):
    """The topics are not at the layout the state was built under; the message names the
    migration. Nothing was read or decided."""


@dataclass(frozen=True)
class Layout:
    """A partition count and the key-to-partition function the state was built under."""

    partitions: int
    partitioner: str = PARTITIONER
    grown_from: int | None = None  # set by repartition: rows of other homes stay behind

    def encode(self) -> bytes:
        fields: dict[str, object] = {"partitions": self.partitions,
                                     "partitioner": self.partitioner}
        if self.grown_from is not None:
            fields["grown_from"] = self.grown_from
        return json.dumps(fields, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Layout:
        """ValueError when ``data`` is not a layout this code writes."""
        fields = json.loads(data)
        count, partitioner = fields.get("partitions"), fields.get("partitioner")
        grown_from = fields.get("grown_from")
        if (not isinstance(count, int) or count < 1 or not isinstance(partitioner, str)
                or not isinstance(grown_from, int | None)):
            raise ValueError(f"not a layout record: {data[:80]!r}")
        return cls(count, partitioner, grown_from)


def migration(found: int) -> str:
    return (f"stop every processor and run `ledger-stream repartition --to {found}` to move "
            "each key's state to the new layout (docs/operations.md, \"Growing partitions\")")


def layout_problem(recorded: Layout, counts: Mapping[str, int]) -> str | None:
    """Why topics at ``counts`` (name: partitions) cannot serve state built under
    ``recorded``, or None when they can."""
    if recorded.partitioner != PARTITIONER:
        return (f"the state was built with partitioner {recorded.partitioner!r}; this "
                f"version places keys with {PARTITIONER!r}")
    other = {name: n for name, n in counts.items() if n != recorded.partitions}
    if not other:
        return None
    found = max(other.values())
    listed = ", ".join(f"{name} has {n}" for name, n in sorted(other.items()))
    return (f"partition count changed: the ledger's state was built for "
            f"{recorded.partitions} partitions ({recorded.partitioner}), but {listed}. Keys "
            f"whose partition moved would be decided as new and dispatched again: "
            f"{migration(found)}")


def read_layout(bootstrap: str, changelog: str, timeout_s: float = 30.0,
                stop: threading.Event | None = None) -> Layout | None:
    """The layout recorded in ``changelog`` (its latest ``~layout`` record), or None when
    none was ever written. Reads partition 0 of the changelog to its end, read_uncommitted:
    the record is written outside transactions, and an open transaction of a processor (a
    row, never a layout) must not hold the read back. A set ``stop`` ends the read within
    about a second (StopRequested)."""
    reader = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                       "group.id": f"ledger-layout-{uuid.uuid4().hex}",
                       "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    deadline = time.monotonic() + timeout_s
    try:
        low, high = _bounds(reader, changelog, timeout_s, stop)
        if high <= low:
            return None
        reader.assign([TopicPartition(changelog, LAYOUT_PARTITION, OFFSET_BEGINNING)])
        found: bytes | None = None
        position = low
        while position < high:
            if stop is not None and stop.is_set():
                raise StopRequested(f"reading the layout from {changelog}")
            if time.monotonic() > deadline:  # a leader gone: the position stops moving
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT, f"{changelog}[{LAYOUT_PARTITION}] not read to "
                    f"offset {high} within {timeout_s:g} s (at {position})"))
            for msg in fetched(reader, 5000, min(timeout_s, 1.0)):
                if msg.error():
                    raise KafkaException(msg.error())
                if msg.key() == LAYOUT_KEY and msg.value():
                    found = msg.value()
                position = max(position, (msg.offset() or 0) + 1)
            [tp] = reader.position([TopicPartition(changelog, LAYOUT_PARTITION)])
            position = max(position, tp.offset)
        return None if found is None else Layout.decode(found)
    finally:
        reader.close()


BOUNDS_ASK_S = 1.0  # one watermark request: a stop is seen between them


def _bounds(reader: Consumer, changelog: str, timeout_s: float,
            stop: threading.Event | None = None) -> tuple[int, int]:
    """Partition 0's low and high watermarks; a topic created a moment ago may be unknown
    to this new client, or have no leader yet, for a moment: asked again (each request
    bounded by a second, so a set ``stop`` is seen) until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if stop is not None and stop.is_set():
            raise StopRequested(f"reading the layout from {changelog}")
        try:
            low, high = reader.get_watermark_offsets(
                TopicPartition(changelog, LAYOUT_PARTITION),
                timeout=max(0.1, min(BOUNDS_ASK_S, deadline - time.monotonic())))
            return int(low), int(high)
        except KafkaException as exc:
            err = exc.args[0]
            passing = err.retriable() or err.code() in (
                KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                KafkaError._TIMED_OUT)
            if not passing or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def write_layout(bootstrap: str, changelog: str, layout: Layout, timeout_s: float = 30.0,
                 stop: threading.Event | None = None) -> None:
    """Record ``layout`` in ``changelog`` (durable when this returns). A set ``stop`` ends
    the wait for the acknowledgement within about a second (StopRequested, reach.py's
    ``wait_in_slices``): the record may still be written, which is harmless (the counts it
    names are the topics')."""
    producer = Producer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "enable.idempotence": True, "acks": "all"})
    errors: list[str] = []

    def delivered(error: object, _msg: object) -> None:
        if error is not None:
            errors.append(str(error))

    producer.produce(changelog, layout.encode(), LAYOUT_KEY, LAYOUT_PARTITION,
                     on_delivery=delivered)
    acknowledged = wait_in_slices(lambda s: producer.flush(s) == 0, timeout_s, stop,
                                  f"recording the layout in {changelog}")
    if not acknowledged or errors:
        raise LayoutRefused(f"recording the layout in {changelog} failed: "
                            f"{errors[0] if errors else 'no answer'}")


def check_layout(bootstrap: str, changelog: str, counts: Mapping[str, int],
                 record: bool = False, timeout_s: float = 30.0, read: bool = True,
                 stop: threading.Event | None = None) -> Layout | None:
    """Compare ``counts`` (topic name: partitions) with the recorded layout. Raises
    LayoutRefused naming the migration when they differ from it, or from each other. With
    none recorded yet (a fresh deployment): ``record`` writes the one ``counts`` share.
    Returns the recorded layout (None: none, and not recorded). ``read=False`` compares the
    counts with each other only. A set ``stop`` ends the read's wait (StopRequested)."""
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{name} has {n}" for name, n in sorted(counts.items()))
        raise LayoutRefused(f"partition counts differ ({listed}): every ledger topic must "
                            "share one count, or one key's events would be decided in two "
                            f"places; {migration(max(counts.values()))}")
    if not read:
        return None
    try:
        recorded = _read_patiently(bootstrap, changelog, timeout_s, stop)
    except (KafkaException, ValueError) as exc:
        raise LayoutRefused(f"reading the partition layout from {changelog} failed: {exc}"
                            ) from exc
    if recorded is None:
        if not record or not counts:
            return None
        recorded = Layout(next(iter(counts.values())))
        write_layout(bootstrap, changelog, recorded, timeout_s, stop)
        return recorded
    problem = layout_problem(recorded, counts)
    if problem:
        raise LayoutRefused(problem)
    return recorded


# One read of the layout, asked again until the start-up bound: the whole 30 s one read had
# before the wait existed, so a long changelog partition that was read in time still is.
READ_ATTEMPT_S = 30.0


def _read_patiently(bootstrap: str, changelog: str, timeout_s: float,
                    stop: threading.Event | None = None) -> Layout | None:
    """read_layout, asked again while Kafka does not answer (a broker restarting, a
    partition without a leader until its replica returns: a processor started then must
    wait, not refuse) until ``timeout_s``; each failed try logged. A record this code did
    not write (ValueError) is refused at once; a set ``stop`` ends the wait."""
    deadline = time.monotonic() + timeout_s
    return keep_asking(
        lambda: read_layout(bootstrap, changelog,
                            max(1.0, min(READ_ATTEMPT_S, deadline - time.monotonic())), stop),
        stop, "partition layout not readable yet; retrying", wait_s=timeout_s,
        fields={"topic": changelog})


def topic_counts(bootstrap: str, names: list[str], timeout_s: float = 30.0,
                 admin: AdminClient | None = None) -> dict[str, int]:
    """Each of ``names``' partition count, as the cluster's metadata has it now (the topics
    missing from it left out); ``admin``: a client to ask (default: a new one)."""
    admin = admin or AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    topics = admin.list_topics(timeout=timeout_s).topics
    return {name: len(topics[name].partitions) for name in names if name in topics}


def patient_counts(bootstrap: str, names: list[str], wait_s: float,
                   attempt_s: float = READ_ATTEMPT_S, stop: threading.Event | None = None
                   ) -> dict[str, int]:
    """topic_counts, asked again while the cluster does not answer, for up to ``wait_s``
    (start-up waits out a broker restart). LayoutRefused when it never answered;
    StopRequested when ``stop`` is set first."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    try:
        return keep_asking(
            lambda: topic_counts(bootstrap, names, max(1.0, min(attempt_s, wait_s)), admin),
            stop, "Kafka did not answer the start-up check; retrying", wait_s=wait_s)
    except KafkaException as exc:
        raise LayoutRefused(f"Kafka did not answer within {wait_s:g} s: {exc}") from exc


def check_roles(bootstrap: str, changelog: str, names: list[str],
                timeout_s: float = 30.0, wait_s: float | None = None,
                stop: threading.Event | None = None) -> Layout | None:
    """What a connector or the view runs at start: the topics ``names`` it uses share one
    count, and that count is the recorded one (when one is recorded). LayoutRefused if not.
    ``wait_s`` (default ``timeout_s``): how long a cluster that does not answer (a broker
    restarting, the layout's partition without a leader) is waited out before refusing,
    each metadata request bounded by ``timeout_s``; a real mismatch is refused at once. A
    set ``stop`` (SIGTERM) ends the wait (StopRequested)."""
    wait_s = timeout_s if wait_s is None else wait_s
    counts = patient_counts(bootstrap, [*names, changelog], wait_s, min(timeout_s, wait_s),
                            stop)
    if changelog not in counts:  # no processor state at all: nothing recorded to match
        check_layout(bootstrap, changelog, counts, record=False, timeout_s=wait_s,
                     read=False)
        return None
    return check_layout(bootstrap, changelog, counts, record=False, timeout_s=wait_s,
                        stop=stop)
