"""A key waiting for an operator, made the way the processor gets there: an intent, a
connector's claim, an unknown outcome, and a lookup that cannot find the effect at a target
that does not deduplicate. The test plays the connector (for a target no real connector
serves); a running processor does the rest."""

from __future__ import annotations

import time
import uuid

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json, tenant_of
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import key_receipts
from ledger_stream.serde import AvroCodec

TARGET = "operator-desk"  # served by no connector: nothing but the test answers for it


def latest_receipt(settings: Settings, key: str, until: set[ev.ReceiptStatus],
                   timeout_s: float = 60.0) -> ev.Receipt:
    """The key's latest receipt once its key_status is one of ``until``."""
    assert settings.kafka_bootstrap
    deadline = time.monotonic() + timeout_s
    while True:
        found = key_receipts(settings.kafka_bootstrap, settings.topic("receipts"), key,
                             AvroCodec())
        if found and found[-1].key_status in until:
            return found[-1]
        assert time.monotonic() < deadline, f"{key}: {found[-1:] or 'no receipt'}"
        time.sleep(0.2)


def waiting_for_operator(settings: Settings, key: str, error: str = "") -> ev.Receipt:
    """Drive ``key`` to needs_reconciliation at attempt 1 through the processor; its
    receipt. ``error``: the outcome and an unqueryable lookup report it, as a connector
    written before failures were summarised did (the target's text verbatim)."""
    assert settings.kafka_bootstrap
    producer = EventProducer(settings, settings.kafka_bootstrap, AvroCodec(), acks="all")
    args = {"to": "customer-1", "template": "refund-done"}
    now = int(time.time() * 1000)
    producer.send("intents", ev.Intent(
        uuid.uuid4().hex, key, tenant_of(key), key.split("/")[1], TARGET, canonical_json(args),
        args_hash(args), ev.Workflow("ops-test", "1", "t-1", "send"), now))
    producer.flush()
    latest_receipt(settings, key, {ev.ReceiptStatus.ACCEPTED})
    claim_id = uuid.uuid4().hex
    producer.send("attempts", ev.AttemptClaim(uuid.uuid4().hex, key, 1, claim_id, "test",
                                              60_000, now))
    producer.send("attempts", ev.AttemptOutcome(uuid.uuid4().hex, key, 1, claim_id,
                                                ev.OutcomeStatus.UNKNOWN, now, error=error))
    looked = ev.ReconcileStatus.UNQUERYABLE if error else ev.ReconcileStatus.NOT_FOUND
    producer.send("attempts", ev.ReconcileResult(uuid.uuid4().hex, key, 1, claim_id,
                                                 looked, False, now, error=error))
    producer.flush()
    producer.close()
    return latest_receipt(settings, key, {ev.ReceiptStatus.NEEDS_RECONCILIATION})
