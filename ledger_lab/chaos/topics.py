"""The ledger's topics for the checker, each key's events in the order they happened, also
across a partition growth.

Kafka orders one partition, and a key lives in one partition per layout: grown from 6 to 12,
a moved key's events before the cut-over sit in its old partition (below 6) and the later
ones in its new home (6 or above). Read partition by partition interleaved, the checker
would take an earlier receipt for the key's latest. So events are ordered by the layout
their partition first appeared in (the counts the soak grew through), then by partition and
offset: per key, that is the order the ledger decided them in.
"""

from __future__ import annotations

import bisect
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
from ledger_stream.serde import AvroCodec, DecodeError

NAMES = ("intents", "attempts", "dispatch", "receipts", "alerts")


def read_in_key_order(bootstrap: str, topics: list[str], counts: list[int],
                      timeout_s: float = 60.0) -> dict[str, list[Any]]:
    """Every decodable event of each topic up to its end now, ordered by (layout of the
    partition, partition, offset); ``counts``: the partition counts grown through, in
    order. TimeoutError when an end is not reached (a verdict on a partial read is none)."""
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
        found: dict[str, list[tuple[int, int, Any]]] = {name: [] for name in topics}
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
                                                     codec.decode(msg.value())))
        return {name: in_key_order(rows, counts) for name, rows in found.items()}
    finally:
        consumer.close()


def in_key_order(rows: list[tuple[int, int, Any]], counts: list[int]) -> list[Any]:
    """The events of (partition, offset, event) rows, by the layout their partition first
    appeared in, then partition and offset: each key's events in the order decided."""
    ordered = sorted(rows, key=lambda r: (layout_of(r[0], counts), r[0], r[1]))
    return [event for _, _, event in ordered]


def layout_of(partition: int, counts: list[int]) -> int:
    """The index of the first layout (of ``counts``, ascending) that has ``partition``."""
    return bisect.bisect_right(counts, partition)


def ledger_topics(bootstrap: str, prefix_topic: Callable[[str], str],
                  counts: list[int]) -> LedgerTopics:
    """``LedgerTopics`` as the checker reads it, in each key's order (module docstring);
    ``prefix_topic`` names a role's topic (``Settings.topic``)."""
    read = read_in_key_order(bootstrap, [prefix_topic(n) for n in NAMES], counts)
    by_role = {name: read[prefix_topic(name)] for name in NAMES}

    def of(name: str, kind: type) -> list[Any]:
        return [e for e in by_role[name] if isinstance(e, kind)]

    return LedgerTopics(of("intents", ev.Intent), of("attempts", ev.AttemptClaim),
                        of("attempts", ev.AttemptOutcome), of("dispatch", ev.Dispatch),
                        of("dispatch", ev.Reconcile), of("receipts", ev.Receipt),
                        of("alerts", ev.Alert), of("dispatch", ev.Grant))
