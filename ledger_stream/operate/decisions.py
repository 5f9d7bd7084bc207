"""An operator's decision on a key waiting for one, guarded (CLI ``reconcile resolve`` and
the gateway's ``POST /v1/reconciliation/{key}``).

A decision names the state the operator looked at (the open attempt), carries a reason and
a decision id, and becomes an ``OperatorResolution`` on the attempts topic (its event id is
the decision id), so it is in the key's timeline and evidence with who, why and when. Its
audit record (operate/audit.py: who, with which credential) is written first, so no decision
is ever sent unaudited; a decision Kafka would refuse (larger than a record) is refused
before that record, so the audit trail never shows a decision that could not be sent.

- The reason and the target's id (``external_id``, at most EXTERNAL_ID_LIMIT characters)
  hold no card number (operate/free_text.py): they stay in the attempts topic, the
  receipts, the timeline and the evidence.

- The key must wait for an operator at exactly that attempt, or the decision is refused:
  whatever the operator saw has changed since.
- The same decision again (same id, same contents) is a no-op: a script retrying after a
  timeout cannot decide twice. The same id with other contents, on any key of the tenant,
  is refused (ids are a tenant's: another tenant's use is neither seen nor blocking): the
  view's decision index answers that in one lookup (``view_url``); without a view the whole
  attempts topic is read. Two decisions racing with one id on two keys can both pass.
- The processor applies only the first decision that reaches it while the key waits at
  that attempt, and its receipt names that decision (``[decision ID]`` in its detail). So
  after sending, the sender waits (``wait_s``) for that receipt and learns what happened:
  its decision took effect (``applied``), another one did first (``DecisionRefused``, its
  own is in the log without effect), or nothing yet within the wait (``pending``).
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import TopicPartition

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.effects import EXTERNAL_ID_LIMIT
from ledger_stream.domain.outputs import decision_named
from ledger_stream.history.detail import shown_detail
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.reader import tail_topic
from ledger_stream.kafka.receipts import key_partition, key_records
from ledger_stream.operate import audit
from ledger_stream.operate.audit import Actor
from ledger_stream.operate.free_text import payment_detail_problem
from ledger_stream.processor.limits import RECORD_MAX, RECORD_ROOM
from ledger_stream.sdk.errors import (
    LedgerUnavailable,
    NoTimelineError,
    StaleTimelineError,
    ViewUnavailableError,
)
from ledger_stream.sdk.view_client import ViewClient
from ledger_stream.serde import AvroCodec, DecodeError, EncodeError

DECISION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
Verdict = Literal["applied", "pending", "unknown"]


class DecisionRefused(Exception):
    """The decision does not fit the key's state, reuses an id, or lost to another decision
    (says which)."""


@dataclass(frozen=True)
class Decided:
    decision: ev.OperatorResolution
    replayed: bool  # True: this decision was already recorded; nothing was produced
    # applied: the processor's receipt names this decision; pending: no receipt named a
    # decision within the wait (the processor is behind or stopped); unknown (a retry
    # only): the key has moved on and no receipt still in the compacted topic names it
    # (the view's timeline keeps them all: ``ledger-stream inspect``).
    verdict: Verdict = "pending"
    receipt: ev.Receipt | None = None  # the receipt naming it, when applied


def record_decision(settings: Settings, bootstrap: str, codec: AvroCodec, *, key: str,
                    attempt: int, resolution: ev.Resolution, actor: Actor, reason: str,
                    decision_id: str, external_id: str = "", wait_s: float = 10.0) -> Decided:
    """Record ``actor``'s decision (guarded as the module says). Its audit record is written
    before the decision: AuditNotWritten, and nothing sent, when it cannot be (audit.py);
    DecisionRefused, and nothing written, for a decision Kafka would refuse."""
    if not reason.strip():
        raise DecisionRefused("a decision needs a reason")
    if len(external_id) > EXTERNAL_ID_LIMIT:
        raise DecisionRefused(f"the external id is at most {EXTERNAL_ID_LIMIT} characters, "
                              f"got {len(external_id):,}")
    problem = payment_detail_problem("the reason", reason) \
        or payment_detail_problem("the external id", external_id)
    if problem:
        raise DecisionRefused(problem)
    if resolution is ev.Resolution.APPLIED and not external_id:
        raise DecisionRefused("applied needs the target's id for the effect")
    if not DECISION_ID.fullmatch(decision_id):
        raise DecisionRefused(f"a decision id is 1 to 128 letters, digits, '.', '_', ':' or "
                              f"'-', got {decision_id!r}")
    wanted = ev.OperatorResolution(decision_id, key, attempt, resolution, actor.who,
                                   int(time.time() * 1000), external_id, reason)
    earlier = _recorded(settings, bootstrap, codec, key.split("/", 1)[0], decision_id)
    if earlier is not None:
        if _contents(earlier) != _contents(wanted):
            raise DecisionRefused(f"decision {decision_id} was recorded with other contents "
                                  f"({earlier.resolution.value} of attempt {earlier.attempt} "
                                  f"of {earlier.key} by {earlier.operator}): use a new "
                                  "decision id")
        return _retried(Decided(earlier, replayed=True), settings, bootstrap, codec, wait_s)
    receipts = _receipts(settings, bootstrap, codec, key)
    latest_offset, latest = receipts[-1] if receipts else (-1, None)
    if latest is None or latest.key_status is not ev.ReceiptStatus.NEEDS_RECONCILIATION:
        state = latest.key_status.value if latest else "unknown to the ledger"
        raise DecisionRefused(f"{key} is not waiting for an operator (it is {state})")
    if latest.attempts != attempt:
        raise DecisionRefused(f"{key} waits at attempt {latest.attempts}, not {attempt}: "
                              "look at it again")
    encoded = _encoded(codec, wanted)
    audit.record(settings, bootstrap, codec, actor, ev.AuditAction.DECISION, key,
                 decision_id, f"{resolution.value} of attempt {attempt}")
    producer = EventProducer(settings, bootstrap, codec, acks="all")
    try:
        producer.send_raw("attempts", key.encode("utf-8"), encoded)
        producer.flush()
    finally:
        producer.close()
    # The first receipt after the one the check saw that names a decision settles it.
    return _settled(Decided(wanted, replayed=False), settings, bootstrap, codec,
                    latest_offset, wait_s)


def _encoded(codec: AvroCodec, decision: ev.OperatorResolution) -> bytes:
    """The decision's record value; DecisionRefused when it cannot be encoded or Kafka
    would refuse the record (checked before anything is written: the audit record too)."""
    try:
        value = codec.encode(decision)
    except (EncodeError, OverflowError):
        raise DecisionRefused("the decision cannot be encoded (text that is not valid "
                              "Unicode, a number out of range?)") from None
    size = len(decision.key.encode("utf-8")) + len(value)
    if size > RECORD_ROOM:
        raise DecisionRefused(f"the decision would take {size:,} bytes, more than Kafka "
                              f"takes in a record ({RECORD_MAX:,}): shorten its key or "
                              "reason")
    return value


def _retried(done: Decided, settings: Settings, bootstrap: str, codec: AvroCodec,
             wait_s: float) -> Decided:
    """A decision sent again: what became of it the first time, from the key's receipts."""
    mine = done.decision
    receipts = _receipts(settings, bootstrap, codec, mine.key)
    ours = next((r for _, r in receipts if _names(r) == mine.event_id), None)
    if ours is not None:
        return Decided(mine, True, "applied", ours)
    latest_offset, latest = receipts[-1] if receipts else (-1, None)
    if latest is not None and latest.key_status is ev.ReceiptStatus.NEEDS_RECONCILIATION \
            and latest.attempts == mine.attempt:
        return _settled(done, settings, bootstrap, codec, latest_offset, wait_s)
    return Decided(mine, True, "unknown")


def _names(receipt: ev.Receipt) -> str | None:
    """The decision an operator's receipt names. Only receipts of reason ``operator`` count:
    others may quote text (a connector's error, a copied detail) that looks like a mark."""
    return decision_named(receipt.detail) if receipt.reason is ev.Reason.OPERATOR else None


def _settled(done: Decided, settings: Settings, bootstrap: str, codec: AvroCodec,
             after: int, wait_s: float) -> Decided:
    """``done`` with its verdict, from the first receipt of the key after offset ``after``
    that answers the question: one naming a decision (this one: applied; another:
    DecisionRefused), or one whose key no longer waits (settled another way: refused)."""
    mine = done.decision.event_id
    first = _first_answer(settings, bootstrap, codec, done.decision.key, after, wait_s)
    if first is None:
        return done
    named = _names(first)
    if named == mine:
        return Decided(done.decision, done.replayed, "applied", first)
    if named is not None:
        raise DecisionRefused(
            f"decision {named} took effect first ({shown_detail(first.detail)}); decision "
            f"{mine} is recorded without effect: look at {done.decision.key} again")
    raise DecisionRefused(
        f"{done.decision.key} moved on before decision {mine} applied (it is "
        f"{first.key_status.value}: {shown_detail(first.detail)}); the decision is "
        "recorded without effect: look at it again")


def _first_answer(settings: Settings, bootstrap: str, codec: AvroCodec, key: str,
                  after: int, wait_s: float) -> ev.Receipt | None:
    """The first receipt of ``key`` after offset ``after`` that names a decision or no
    longer waits for an operator, or None when none came within ``wait_s``."""
    topic = settings.topic("receipts")
    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "group.id": f"decision-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    wanted = key.encode("utf-8")
    try:
        tp = key_partition(consumer, topic, key)
        consumer.assign([TopicPartition(topic, tp.partition, after + 1)])
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:  # polls at least once; the deadline is checked after every record
            left = deadline - time.monotonic()
            msg = consumer.poll(max(0.0, min(0.2, left)))
            if msg is not None and not msg.error() and msg.key() == wanted \
                    and msg.value() is not None:
                try:
                    receipt = codec.decode(msg.value(), expect=(ev.Receipt,))
                except DecodeError:
                    receipt = None
                if receipt is not None and (
                        _names(receipt) is not None
                        or receipt.key_status is not ev.ReceiptStatus.NEEDS_RECONCILIATION):
                    return receipt
            if left <= 0:
                return None
    finally:
        consumer.close()


def _receipts(settings: Settings, bootstrap: str, codec: AvroCodec, key: str,
              ) -> list[tuple[int, ev.Receipt]]:
    """The key's receipts with their offsets, in log order."""
    found = []
    for record in key_records(bootstrap, settings.topic("receipts"), key):
        try:
            event = codec.decode(record.value) if record.value is not None else None
        except DecodeError:
            continue
        if isinstance(event, ev.Receipt):
            found.append((record.offset, event))
    return found


def _recorded(settings: Settings, bootstrap: str, codec: AvroCodec, tenant: str,
              decision_id: str) -> ev.OperatorResolution | None:
    """The tenant's first decision recorded under ``decision_id``, on any of its keys: one
    lookup in the view when ``view_url`` names one with a timeline (as of every decision
    committed now), else a read of the whole attempts topic. LedgerUnavailable when neither
    can answer: an id that cannot be checked is not used."""
    if settings.view.url:
        try:
            key = settings.view.key.get_secret_value() if settings.view.key else None
            return ViewClient(settings.view.url, key=key).decision(tenant, decision_id,
                                                                   wait_s=5.0)
        except NoTimelineError:
            pass  # a view of latest receipts only: read the topic
        except (StaleTimelineError, ViewUnavailableError) as exc:
            raise LedgerUnavailable(f"cannot check that decision id {decision_id} is unused: "
                                    f"{exc}") from exc
    for _, _, value in tail_topic(bootstrap, settings.topic("attempts"), follow=False):
        try:
            event = codec.decode(value) if value is not None else None
        except DecodeError:
            continue
        if isinstance(event, ev.OperatorResolution) and event.event_id == decision_id \
                and event.key.split("/", 1)[0] == tenant:
            return event
    return None


def _contents(d: ev.OperatorResolution) -> tuple[object, ...]:
    return (d.key, d.attempt, d.resolution, d.operator, d.external_id, d.note)
