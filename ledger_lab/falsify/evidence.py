"""The evidence a scenario is judged on: the target's own ledger and the ledger's topics.

The payments sandbox records every effect and every request it received (with the
``Idempotency-Key`` and ``X-Attempt-Id`` headers), whoever sent them. The ledger's topics
say which intents were accepted, which attempts were claimed and dispatched, and how each
key ended. Comparing the two finds what an agent's trace cannot show: a second effect, a
request no intent or attempt explains, an approval that did not cover what was paid.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from ledger_lab.harness.agents import AgentWorld
from ledger_lab.harness.approvers import TEST_APPROVER, trusted
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import approval_problem
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.message import fetched, position
from ledger_stream.kafka.offsets import log_bounds
from ledger_stream.serde import AvroCodec, DecodeError

BYPASS_KEY = re.compile(r"^bypass-(?P<invoice>.+)-[0-9a-f]{32}$")
APPROVAL_ACTIONS = frozenset({"refund"})  # what the matrix's processors require approval for


def refund_key(invoice: str) -> str:
    return f"acme/refund/{invoice}"


def business_key(idempotency_key: str) -> str:
    """The operation key a request stands for; a bypassed tool's per-execution key
    (``bypass-<invoice>-<hex>``) maps back to its invoice's refund."""
    match = BYPASS_KEY.match(idempotency_key)
    return refund_key(match.group("invoice")) if match else idempotency_key


def is_bypass(idempotency_key: str) -> bool:
    return BYPASS_KEY.match(idempotency_key) is not None


@dataclass(frozen=True)
class TargetLedger:
    """A snapshot of the sandbox's ``GET /v1/ledger``."""

    effects: list[dict[str, Any]]
    requests: list[dict[str, Any]]

    @classmethod
    def read(cls, world: AgentWorld) -> TargetLedger:
        ledger = world.sandbox.ledger()
        return cls(ledger["effects"], ledger["requests"])

    def effects_for(self, key: str, bypass: bool) -> list[dict[str, Any]]:
        return [e for e in self.effects if is_bypass(e["idempotency_key"]) == bypass
                and business_key(e["idempotency_key"]) == key]

    def requests_for(self, key: str, bypass: bool = False) -> list[dict[str, Any]]:
        return [r for r in self.requests if is_bypass(r["idempotency_key"]) == bypass
                and business_key(r["idempotency_key"]) == key]


@dataclass(frozen=True)
class LedgerTopics:
    """Everything on one world's ledger topics, decoded, in partition order per key."""

    intents: list[ev.Intent]
    claims: list[ev.AttemptClaim]
    outcomes: list[ev.AttemptOutcome]
    dispatches: list[ev.Dispatch]
    reconciles: list[ev.Reconcile]
    receipts: list[ev.Receipt]
    alerts: list[ev.Alert]
    grants: list[ev.Grant] = field(default_factory=list)

    @classmethod
    def read(cls, world: AgentWorld) -> LedgerTopics:
        return cls.read_from(world.stack.bootstrap, world.stack.settings)

    @classmethod
    def read_from(cls, bootstrap: str, settings: Settings) -> LedgerTopics:
        names = ("intents", "attempts", "dispatch", "receipts", "alerts")
        read = read_topics(bootstrap, [settings.topic(n) for n in names])
        by_topic = {name: read[settings.topic(name)] for name in names}

        def of(name: str, kind: type) -> list[Any]:
            return [e for e in by_topic[name] if isinstance(e, kind)]

        return cls(of("intents", ev.Intent), of("attempts", ev.AttemptClaim),
                   of("attempts", ev.AttemptOutcome), of("dispatch", ev.Dispatch),
                   of("dispatch", ev.Reconcile), of("receipts", ev.Receipt),
                   of("alerts", ev.Alert), of("dispatch", ev.Grant))

    def final_status(self, key: str) -> str:
        """The key's state as its latest receipt states it; "" when it has none."""
        found = [r for r in self.receipts if r.key == key]
        return found[-1].key_status.value if found else ""

    def intents_for(self, key: str) -> list[ev.Intent]:
        return [i for i in self.intents if i.key == key]

    def answer(self, intent_event_id: str) -> ev.Receipt | None:
        """The receipt that answered an intent (the first one naming it)."""
        return next((r for r in self.receipts if r.intent_event_id == intent_event_id), None)

    def alert_kinds(self, key: str) -> set[str]:
        return {a.kind.value for a in self.alerts if a.key == key}


def read_topics(bootstrap: str, names: list[str], timeout_s: float = 60.0,
                ) -> dict[str, list[Any]]:
    """Every decodable event of each topic, from the beginning to its end at the time of
    the call, with one consumer for all (undecodable records are skipped)."""
    codec = AvroCodec()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"falsify-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        parts = [TopicPartition(name, p) for name in names
                 for p in consumer.list_topics(name, timeout=10).topics[name].partitions]
        ends = {(name, p): end for name in names for p, (_, end) in
                log_bounds(bootstrap, name, [tp.partition for tp in parts
                                             if tp.topic == name]).items()}
        parts = [tp for tp in parts if ends[(tp.topic, tp.partition)] > 0]
        consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)
                         for tp in parts])
        found: dict[str, list[Any]] = {name: [] for name in names}
        deadline = time.monotonic() + timeout_s
        # The consumer's positions, not the last records' offsets: transaction markers
        # take offsets that are never delivered.
        while any(tp.offset < ends[(tp.topic, tp.partition)]
                  for tp in consumer.position(parts)):
            if time.monotonic() > deadline:
                # A partial read would make a verdict on what happens to be there: refuse.
                raise TimeoutError(f"{', '.join(names)}: the end of every partition was not "
                                   f"reached within {timeout_s:g} s")
            for msg in fetched(consumer, 500, 0.2):
                if msg.error():
                    continue
                with contextlib.suppress(DecodeError):
                    found[position(msg)[0]].append(codec.decode(msg.value()))
        return found
    finally:
        consumer.close()


def uncorrelated_requests(target: TargetLedger, topics: LedgerTopics) -> list[dict[str, Any]]:
    """Requests at the target (outside bypassed runs) that no accepted intent and no claimed
    attempt explain: the connector sends the claim id as ``X-Attempt-Id``."""
    dispatched = {d.key for d in topics.dispatches}
    claims: dict[str, set[str]] = defaultdict(set)
    for claim in topics.claims:
        claims[claim.key].add(claim.claim_id)
    return [r for r in target.requests if not is_bypass(r["idempotency_key"])
            and (r["idempotency_key"] not in dispatched
                 or r["attempt_id"] not in claims[r["idempotency_key"]])]


def approval_mismatches_accepted(topics: LedgerTopics) -> list[str]:
    """Intents whose approval does not cover them (missing, forged, another payload hash,
    expired) for which the ledger nevertheless dispatched work: their event ids. Expiry is
    judged at the intent's own stamp: the matrix's agents are honest clients on the broker's
    machine, so it is within milliseconds of the broker time the ledger judged by."""
    dispatched = {d.intent_event_id for d in topics.dispatches}
    return [i.event_id for i in topics.intents if i.event_id in dispatched and approval_problem(
        i, trusted(TEST_APPROVER), i.action in APPROVAL_ACTIONS, i.at_ms) is not None]


def ambiguous_keys(topics: LedgerTopics) -> dict[str, str]:
    """Keys whose outcome was unknown at some point (an ``unknown`` attempt outcome, a
    reconciliation, a reconciling receipt) and the status each ended in."""
    keys = {o.key for o in topics.outcomes if o.status is ev.OutcomeStatus.UNKNOWN}
    keys |= {r.key for r in topics.reconciles}
    keys |= {r.key for r in topics.receipts if r.key_status is ev.ReceiptStatus.RECONCILING}
    return {key: topics.final_status(key) for key in sorted(keys)}
