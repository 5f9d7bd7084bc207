"""Settles graph threads that were left holding a pending receipt.

When a ledger tool's wait runs out, the thread's state keeps the pending receipt
(``ledger_receipts[key]``, status accepted / in_progress / reconciling). The follower reads
``ledger.intents`` (to learn which thread asked for which key) and ``ledger.receipts``, and
when a key settles it writes the final receipt into every thread still holding it pending,
with ``graph.update_state``. Re-reading the topics is harmless: a thread whose receipt is no
longer pending is left alone.

The two topics are read in no particular order across each other: a follower started after
a key settled may read its final receipt before the intent that names the thread. So the
latest final receipt of each key (up to ``SETTLED_KEPT`` keys, the oldest forgotten first)
is kept, and a thread learned later is settled from it at once.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from typing import Any

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.message import fetched
from ledger_stream.langgraph.tool import PENDING, receipt_summary
from ledger_stream.serde import AvroCodec, DecodeError

logger = logging.getLogger(__name__)

SETTLED_KEPT = 100_000  # keys whose final receipt is kept for threads not yet learned
# Only a key holding its effect's outcome is kept: a key whose state reads "rejected" (or
# "held") holds none, and a later intent of it may still succeed (a hostile review found a
# kept rejection settling a later, approved intent's thread as rejected).
KEY_OUTCOMES = frozenset({ev.ReceiptStatus.SUCCEEDED, ev.ReceiptStatus.FAILED})


class ReceiptFollower:
    def __init__(self, settings: Settings, bootstrap: str, graph: Any,
                 group: str | None = None, codec: AvroCodec | None = None) -> None:
        self._graph = graph
        self._codec = codec or AvroCodec()
        self._threads: dict[str, set[str]] = {}
        self._settled: OrderedDict[str, ev.Receipt] = OrderedDict()  # key -> final receipt
        self._intents = settings.topic("intents")
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap,
            **CLIENT_CONFIG,
            "group.id": group or f"{settings.topics.prefix}.graph-follower.{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        })
        self._consumer.subscribe([self._intents, settings.topic("receipts")])
        self.updated = 0

    def poll(self, timeout_s: float = 0.5) -> int:
        """Handle what arrived; returns how many thread states were updated."""
        before = self.updated
        for msg in fetched(self._consumer, 500, timeout_s):
            if msg.error():
                continue
            try:
                event = self._codec.decode(msg.value())
            except DecodeError:
                continue
            if isinstance(event, ev.Intent) and event.workflow.thread_id:
                self._threads.setdefault(event.key, set()).add(event.workflow.thread_id)
                settled = self._settled.get(event.key)
                if settled is not None:  # its final receipt was read first
                    self._settle(settled)
            elif isinstance(event, ev.Receipt) and event.status is event.key_status \
                    and event.status.value not in PENDING:
                if event.status in KEY_OUTCOMES:
                    self._remember(event)
                self._settle(event)
        return self.updated - before

    def _remember(self, receipt: ev.Receipt) -> None:
        self._settled.pop(receipt.key, None)
        self._settled[receipt.key] = receipt
        while len(self._settled) > SETTLED_KEPT:
            self._settled.popitem(last=False)

    def _settle(self, receipt: ev.Receipt) -> None:
        for thread_id in self._threads.get(receipt.key, ()):
            config = {"configurable": {"thread_id": thread_id}}
            held = self._graph.get_state(config).values.get("ledger_receipts", {})
            current = held.get(receipt.key)
            if current is None or current.get("status") not in PENDING:
                continue
            # As the answer to the thread's own intent: already_done when another's.
            self._graph.update_state(config, {"ledger_receipts": {
                receipt.key: receipt_summary(receipt, current.get("intent_event_id"))}})
            self.updated += 1
            logger.info("thread receipt settled", extra={"fields": {
                "thread_id": thread_id, "key": receipt.key, "status": receipt.status.value}})

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.poll()

    def close(self) -> None:
        self._consumer.close()
