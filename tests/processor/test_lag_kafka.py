"""A processor behind its log, on the real broker: the deadlines that wait for an answer to
its own outputs count from when those outputs left, so catching up a backlog pages nobody.

The processor is paused (SIGSTOP, as a long GC pause or an overloaded host would) right
after it dispatched a key; meanwhile the connector claims the dispatch and the partition's
log runs on for longer than lease + skew + stall + reconcile timeout. Resumed, the processor
grants the claim while its partition clock runs through that backlog. The Grant leaves far
too late to be used, so the holder answers ``not_called`` and the key moves to its next
attempt. Before, the backlog expired the lease deadline of that Grant (a Reconcile naming
claim "timer"), then the reconcile deadline of that Reconcile: NEEDS_OPERATOR and
``reconciliation_required`` for a key nothing was unknown about.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from ledger_lab.harness.processes import start_processor
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.reader import read_topic
from tests.factories import claim, intent, outcome
from tests.processor.support import CODEC, read_all, receipts_for

pytestmark = pytest.mark.timeout(240)

# stall_after leaves the test, as the connector, 6 s to answer the Grant once it leaves (a
# loaded machine); the pause stays within the transaction timeout (10 s).
LEASE_MS, SKEW_MS, STALL_MS, RECONCILE_MS = 300, 100, 6_000, 1_000
BACKLOG_S = 8.5  # > (LEASE_MS + SKEW_MS + STALL_MS + RECONCILE_MS) / 1000 = 7.4 s


def test_a_processor_catching_up_a_backlog_sends_no_key_to_an_operator(
        ledger_topics: Settings, tmp_path: Path) -> None:
    s = ledger_topics
    env = {"LEDGER_TICK_INTERVAL_MS": "200", "LEDGER_STALL_AFTER_MS": str(STALL_MS),
           "LEDGER_CLOCK_SKEW_MS": str(SKEW_MS),
           "LEDGER_RECONCILE_TIMEOUT_MS": str(RECONCILE_MS),
           "LEDGER_SESSION_TIMEOUT_MS": "30000",  # the pause is no rebalance
           "LEDGER_PREGRANT_LEASE_MS": "0"}  # a plain claim's Grant (a pre-grant holds it)
    proc = start_processor(s, tmp_path / "state", tmp_path / "processor.log", env=env)
    key = "acme/refund/lagged"
    partition = partition_for(key.encode(), s.partitions)
    try:
        producer = EventProducer(s, s.kafka_bootstrap)
        reserve = intent(key=key)
        producer.send("intents", reserve)
        producer.flush()
        receipts_for(s, {reserve.event_id}, proc=proc)
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            # The connector claims the dispatch it read; the partition's log runs on (its
            # records here are Ticks: any record's broker timestamp moves the clock).
            producer.send("attempts", claim(key=key, claim_id="holder", lease_ms=LEASE_MS))
            producer.flush()
            started = time.monotonic()
            while time.monotonic() - started < BACKLOG_S:
                producer.send_raw("attempts", b"~tick", CODEC.encode(
                    ev.Tick(partition, "backlog", int(time.time() * 1000))), partition)
                producer.flush()
                time.sleep(0.1)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        # The connector's part: the Grant comes after its lease, so it is never used.
        grants = read_topic(s.kafka_bootstrap, s.topic("dispatch"), timeout_s=60,
                            until=lambda ds: any(isinstance(d, ev.Grant) for d in ds))
        grant = next(d for d in grants if isinstance(d, ev.Grant))
        assert grant.lease_until_ms < time.time() * 1000 - BACKLOG_S * 500, grant
        producer.send("attempts", outcome(ev.OutcomeStatus.NOT_CALLED, 1, "holder", key=key))
        producer.flush()
        receipts = read_topic(s.kafka_bootstrap, s.topic("receipts"), timeout_s=60,
                              until=lambda rs: any(r.key == key and r.attempts == 2
                                                   for r in rs))
        dispatch = read_all(s, "dispatch")
        alerts = read_all(s, "alerts")
    finally:
        assert proc.stop() == 0, proc.tail()

    statuses = [r.status for r in receipts if r.key == key]
    assert statuses == [ev.ReceiptStatus.ACCEPTED, ev.ReceiptStatus.IN_PROGRESS,
                        ev.ReceiptStatus.ACCEPTED], statuses
    assert [d for d in dispatch if isinstance(d, ev.Reconcile)] == []
    # A claim sent later than stall_after (a very slow machine) rightly raises ``stalled``.
    assert [a for a in alerts if a.key == key
            and a.kind is not ev.AlertKind.STALLED] == [], alerts
