"""The receipts thread on the real broker, behind the log: a waiter registered while the
thread hands over a drain of older records takes none of them. Before 2026-12-05 a client
whose thread had fallen behind answered a resubmitted intent (the same event id) with that
intent's older receipt, from before the key changed (an operator resolved it)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from ledger_stream import LedgerClient
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.producer import EventProducer

pytestmark = pytest.mark.timeout(120)


def _receipt(key: str, intent_id: str, status: ev.ReceiptStatus) -> ev.Receipt:
    return ev.Receipt(receipt_id=uuid.uuid4().hex, key=key, intent_event_id=intent_id,
                      status=status, reason=ev.Reason.NONE, args_hash="h", attempts=1,
                      at_ms=1, key_status=status)


def test_a_resubmit_while_the_thread_is_behind_never_gets_the_older_receipt(
        ledger_topics: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    s = ledger_topics
    key = f"acme/refund/{uuid.uuid4().hex[:8]}"
    partition = partition_for(key.encode(), s.partitions)
    blocker = next(k for k in (f"acme/refund/b{i}" for i in range(1000))
                   if partition_for(k.encode(), s.partitions) == partition)
    client = LedgerClient(s)
    producer = EventProducer(s, s.kafka_bootstrap)
    try:
        hub = client.receipts()
        held, release = threading.Event(), threading.Event()
        hand_over = hub._hand_over

        def slow_hand_over(msg: Any) -> None:  # the thread falls behind at the blocker
            if msg.key() == blocker.encode():
                held.set()
                release.wait(60)
            hand_over(msg)

        monkeypatch.setattr(hub, "_hand_over", slow_hand_over)
        first = hub.follow(key)
        first_blocker = hub.follow(blocker)  # so the blocker's record is handed over
        # One produce batch: the blocker and the key's older receipt arrive in one fetch,
        # and the thread is held at the blocker with the older receipt not handed over.
        producer.send("receipts", _receipt(blocker, "b", ev.ReceiptStatus.SUCCEEDED))
        producer.send("receipts", _receipt(key, "i1", ev.ReceiptStatus.NEEDS_RECONCILIATION))
        producer.flush()
        assert held.wait(30), "the thread never reached the blocker"

        again = hub.follow(key)  # the resubmit of intent i1 registers now
        producer.send("receipts", _receipt(key, "i1", ev.ReceiptStatus.SUCCEEDED))
        producer.flush()
        release.set()
        seen = []
        while len(seen) < 1 and (more := again.read(10)):
            seen += [(r.intent_event_id, r.status) for r in more]
        assert seen == [("i1", ev.ReceiptStatus.SUCCEEDED)]
        older = []
        while len(older) < 2 and (more := first.read(10)):
            older += [r.status for r in more]
        assert older == [ev.ReceiptStatus.NEEDS_RECONCILIATION, ev.ReceiptStatus.SUCCEEDED]
        assert not again.read(0.5)  # and nothing after it
        for waiter in (first, first_blocker, again):
            waiter.close()
    finally:
        release.set()
        producer.close()
        client.close()
