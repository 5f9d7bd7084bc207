"""Freezing an action (CLI ``freeze`` / ``unfreeze`` / ``freezes``, the gateway's
``/v1/freezes``): containment as events on the attempts topic.

A freeze or unfreeze is one Containment event written to **every** partition of the
attempts topic, each copy naming its partition, all with the same event id and the key
``~containment/<event id>/<send id>`` (unique per send, so compaction keeps every one, a
retry's too: the audit trail, and the order ``active`` replays). Each partition's processor
applies its copy at that point of its log (domain/containment.py). The command returns only
when every copy is acknowledged; when some are not, it says so, and running it again with
the same event id is safe: a processor that applied the command already ignores the repeat,
even when the scope was frozen or unfrozen by someone else in between.

The active freezes are read back from partition 0 of the attempts topic (every freeze
has a copy there), so listing them costs one partition's scan, filtered by key before
anything is decoded.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import (
    command_digest,
    invalid_containment,
    remember,
    scope_of,
)
from ledger_stream.domain.keys import InvalidKeyError, operation_key
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import partition_records
from ledger_stream.serde import AvroCodec, DecodeError

KEY_PREFIX = "~containment/"
REASON_LIMIT = 500


class ContainmentRefused(ValueError):
    """The action, tenant or reason cannot be frozen as given (says why)."""


@dataclass(frozen=True)
class FreezeRecord:
    """A freeze as the log holds it (partition 0's copy)."""

    event: ev.Containment
    offset: int
    timestamp_ms: int

    @property
    def scope(self) -> str:
        return scope_of(self.event.tenant, self.event.action)


def checked(action: str, tenant: str, reason: str) -> None:
    """ContainmentRefused unless ``action`` and ``tenant`` (empty: every tenant) are valid
    key parts and ``reason`` fits."""
    if tenant == "*":
        raise ContainmentRefused("tenant '*': leave --tenant out to freeze every tenant")
    try:
        operation_key(tenant or "any", action, "freeze")
    except InvalidKeyError as exc:
        raise ContainmentRefused(f"action {action!r} / tenant {tenant!r}: {exc}") from exc
    if len(reason) > REASON_LIMIT:
        raise ContainmentRefused(f"reason longer than {REASON_LIMIT} characters")


def send(settings: Settings, bootstrap: str, codec: AvroCodec, *, action: str, tenant: str,
         frozen: bool, mode: ev.FreezeMode = ev.FreezeMode.HOLD, reason: str = "",
         operator: str = "", event_id: str = "") -> tuple[ev.Containment, dict[int, int]]:
    """Write the freeze (or unfreeze) to every partition of the attempts topic and wait
    for every copy to be acknowledged. Returns the event (partition 0's copy) and each
    copy's offset by partition. DeliveryFailed when a copy was not acknowledged."""
    checked(action, tenant, reason)
    event_id = event_id or new_event_id()
    # The processor's own check, before anything is sent: a copy it refuses is poison in
    # every partition, and the command would report a freeze no processor holds.
    why = invalid_containment(ev.Containment(event_id, 0, action, tenant, frozen, mode,
                                             reason, operator, 0))
    if why:
        raise ContainmentRefused(why)
    partitions = _partitions(bootstrap, settings.topic("attempts"))
    producer = EventProducer(settings, bootstrap, codec)
    producer.track_offsets()
    try:
        now = int(time.time() * 1000)
        copies = [ev.Containment(event_id, p, action, tenant, frozen, mode, reason, operator,
                                 now) for p in range(partitions)]
        key = f"{KEY_PREFIX}{event_id}/{uuid.uuid4().hex}".encode()
        for copy in copies:
            producer.send_raw("attempts", key, codec.encode(copy), copy.partition)
        producer.flush()
        offsets = dict(producer.delivered or ())
    finally:
        producer.close()
    return copies[0], offsets


def new_event_id() -> str:
    return f"freeze-{uuid.uuid4().hex}"


def not_applied(settings: Settings, bootstrap: str, offsets: dict[int, int],
                wait_s: float) -> list[int]:
    """The partitions whose processor has not applied its copy (its consumer group,
    ``settings.consumer_group``, has not committed past the copy's offset) within
    ``wait_s`` seconds; [] once every partition's has. A committed offset is the end of a
    checkpoint: the decisions up to it, the freeze's included, are in force."""
    topic = settings.topic("attempts")
    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "group.id": settings.consumer_group,  # read, never joined
                         "enable.auto.commit": False})
    deadline = time.monotonic() + wait_s
    try:
        while True:
            committed = consumer.committed(
                [TopicPartition(topic, p) for p in sorted(offsets)], timeout=10)
            left = sorted(tp.partition for tp in committed if tp.offset <= offsets[tp.partition])
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.2)
    finally:
        consumer.close()


def log(settings: Settings, bootstrap: str, codec: AvroCodec,
        timeout_s: float = 30.0) -> list[FreezeRecord]:
    """Every freeze and unfreeze still in the log, oldest first (partition 0's copies).
    A record under the containment prefix that does not decode is skipped."""
    prefix = KEY_PREFIX.encode()
    found = []
    for record in partition_records(bootstrap, settings.topic("attempts"), lambda _: 0,
                                    lambda k: k is not None and k.startswith(prefix),
                                    timeout_s):
        if record.value is None:
            continue
        try:
            event = codec.decode(record.value, (ev.Containment,))
        except DecodeError:
            continue
        found.append(FreezeRecord(event, record.offset, record.timestamp_ms))
    return found


def active(records: list[FreezeRecord]) -> list[FreezeRecord]:
    """The freezes in force after ``records``, in the order they were first frozen (a
    freeze of a frozen scope updates it in place), by the processors' rule: a record whose
    event id was applied already (a retried command) changes nothing."""
    skip = repeats(records)
    scopes: dict[str, FreezeRecord] = {}
    for record in records:
        if record.offset in skip:
            continue
        if record.event.frozen:
            scopes[record.scope] = record
        else:
            scopes.pop(record.scope, None)
    return list(scopes.values())


def repeats(records: list[FreezeRecord]) -> set[int]:
    """The offsets of the records that repeat a command applied before them (retries),
    which the processors ignore (domain/containment.py, ``Containment.repeats``)."""
    applied: tuple[str, ...] = ()
    found = set()
    for record in records:
        if record.event.event_id and command_digest(record.event) in applied:
            found.add(record.offset)
        else:
            applied = remember(applied, record.event)
    return found


def _partitions(bootstrap: str, topic: str) -> int:
    from ledger_stream.kafka.client_config import CLIENT_CONFIG

    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "group.id": f"freeze-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        if meta.error is not None or not meta.partitions:
            raise KafkaSetupError(f"{topic} is not available ({meta.error}): run "
                                  "`ledger-stream topics create` with the same settings")
        return len(meta.partitions)
    finally:
        consumer.close()
