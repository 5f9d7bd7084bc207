"""The ledger's topics for the checker, each key's events in the order they happened, also
across a partition growth.

Kafka orders one partition, and a key lives in one partition per layout: grown from 6 to 12,
a moved key's events before the cut-over sit in its old partition and the later ones in its
new home. Read partition by partition interleaved, the checker would take an earlier receipt
for the key's latest. So each record is placed under the layout it was decided in, by the
cut-over offsets the soak recorded at each growth (:func:`cut_at_growth`: for the input
topics the processors' committed offsets, for the others the ends), then ordered by that
layout, partition and offset: per key, the order the ledger decided them in.

A held agent may still place an intent (or a connector an attempt) on the key's old
partition after the growth. The processor does not decide that copy: it forwards the same
bytes to the key's new home and decides them there. So an input record past the cut-over in
the key's old home under the previous count (not its home now) is left out; its forwarded
copy stands in its place. Read with the copy, an intent forwarded after an intent placed at
the new home directly would be ordered first, and taken for the one that reserved the key.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from ledger_lab.falsify.evidence import LedgerTopics
from ledger_stream.domain import events as ev
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.message import fetched
from ledger_stream.kafka.offsets import committed_offsets, log_bounds
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.serde import AvroCodec, DecodeError

NAMES = ("intents", "attempts", "dispatch", "receipts", "alerts")
INPUTS = ("intents", "attempts")  # what the processor forwards from a key's old partition
Cut = dict[str, dict[int, int]]  # topic name -> partition -> first offset of the next layout
Row = tuple[int, int, bytes, Any]  # partition, offset, record key, event


def read_in_key_order(bootstrap: str, topics: list[str], counts: list[int],
                      cuts: list[Cut] | None = None, inputs: frozenset[str] = frozenset(),
                      timeout_s: float = 60.0) -> dict[str, list[Any]]:
    """Every decodable event of each topic up to its end now, in each key's order
    (:func:`in_key_order`); ``counts``: the partition counts grown through, in order;
    ``cuts``: the cut-over offsets of each growth; ``inputs``: the topics the processor
    forwards from. TimeoutError when an end is not reached (a verdict on a partial read
    is none)."""
    codec = AvroCodec()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        parts = [TopicPartition(name, p) for name in topics
                 for p in consumer.list_topics(name, timeout=10).topics[name].partitions]
        ends = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=10)[1]
                for tp in parts}
        parts = [tp for tp in parts if ends[(tp.topic, tp.partition)] > 0]
        consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)
                         for tp in parts])
        found: dict[str, list[Row]] = {name: [] for name in topics}
        deadline = time.monotonic() + timeout_s
        # The positions, not the last offsets: transaction markers are never delivered.
        while any(tp.offset < ends[(tp.topic, tp.partition)]
                  for tp in consumer.position(parts)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{', '.join(topics)}: the end of every partition was "
                                   f"not reached within {timeout_s:g} s")
            for msg in fetched(consumer, 500, 0.2):
                if msg.error():
                    continue
                with contextlib.suppress(DecodeError):
                    found[msg.topic() or ""].append((msg.partition() or 0, msg.offset() or 0,
                                                     msg.key() or b"",
                                                     codec.decode(msg.value())))
        return {name: in_key_order(rows, counts, [c.get(name, {}) for c in cuts or []],
                                   name in inputs)
                for name, rows in found.items()}
    finally:
        consumer.close()


def in_key_order(rows: list[Row], counts: list[int], cuts: list[dict[int, int]],
                 forwarded: bool = False) -> list[Any]:
    """The events of (partition, offset, key, event) rows of one topic, by the layout each
    was decided in (``cuts``: per growth, each partition's first offset decided under the
    grown layout; a partition not named came with a growth), then partition and offset:
    each key's events in the order decided. ``forwarded``: an input topic, whose records
    past a cut-over in a key's old partition are left out (the processor decides their
    forwarded copy at the key's new home)."""
    placed = []
    for partition, offset, key, event in rows:
        layout = sum(1 for cut in cuts if offset >= cut.get(partition, 0))
        if (forwarded and layout and not isinstance(event, PARTITIONED)
                and partition_for(key, counts[layout]) != partition
                and partition_for(key, counts[layout - 1]) == partition):
            continue
        placed.append((layout, partition, offset, event))
    placed.sort(key=lambda r: r[:3])
    return [event for *_, event in placed]


PARTITIONED = (ev.Tick, ev.Containment)  # written to the partition they name, any key


def cut_at_growth(bootstrap: str, topic_of: Callable[[str], str], group: str,
                  partitions: int) -> Cut:
    """Where the layout changed, taken with the processors stopped and the repartition
    done: per topic, the first offset of each of the ``partitions`` old partitions that is
    decided under the grown layout. For the input topics that is the processors' committed
    offset (what they decided under the old count; what follows is read under the new one),
    for the others the end of the log (written by processors of the old count)."""
    cut: Cut = {}
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False})
    try:
        for role in INPUTS:
            name = topic_of(role)
            cut[name] = {tp.partition: max(tp.offset, 0) for tp in committed_offsets(
                reader, [TopicPartition(name, p) for p in range(partitions)], 30.0)}
    finally:
        reader.close()
    for role in NAMES:
        if role not in INPUTS:
            name = topic_of(role)
            cut[name] = {p: end for p, (_, end) in
                         log_bounds(bootstrap, name, list(range(partitions)), 30.0).items()}
    return cut


def ledger_topics(bootstrap: str, prefix_topic: Callable[[str], str],
                  counts: list[int], cuts: list[Cut] | None = None) -> LedgerTopics:
    """``LedgerTopics`` as the checker reads it, in each key's order (module docstring);
    ``prefix_topic`` names a role's topic (``Settings.topic``)."""
    read = read_in_key_order(bootstrap, [prefix_topic(n) for n in NAMES], counts, cuts,
                             frozenset(prefix_topic(n) for n in INPUTS))
    by_role = {name: read[prefix_topic(name)] for name in NAMES}

    def of(name: str, kind: type) -> list[Any]:
        return [e for e in by_role[name] if isinstance(e, kind)]

    return LedgerTopics(of("intents", ev.Intent), of("attempts", ev.AttemptClaim),
                        of("attempts", ev.AttemptOutcome), of("dispatch", ev.Dispatch),
                        of("dispatch", ev.Reconcile), of("receipts", ev.Receipt),
                        of("alerts", ev.Alert), of("dispatch", ev.Grant))
