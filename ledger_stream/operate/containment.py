"""Freezing an action (CLI ``freeze`` / ``unfreeze`` / ``freezes``, the gateway's
``/v1/freezes``): containment as events on the attempts topic.

A freeze or unfreeze is one Containment event written to **every** partition of the
attempts topic in one transaction (all partitions' processors, read-committed readers, see it
or none does), each copy naming its partition, all with the same event id and the key
``~containment/<event id>/<send id>`` (unique per send, so compaction keeps every one, a
retry's too: the audit trail, and the order ``active`` replays). Each partition's processor
applies its copy at that point of its log (domain/containment.py). The command returns only
once the transaction committed; when it did not, it says so, and running it again with the
same event id is safe: a processor that applied the command ignores the repeat, even when
the scope was frozen or unfrozen by someone else in between.

The active freezes are read back from partition 0 of the attempts topic (every freeze
has a copy there), so listing them costs one partition's scan, filtered by key before
anything is decoded.

Who sent a command, with which credential, is written to the audit topic before the command
(operate/audit.py): a command whose audit record cannot be written is not sent.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import (
    COMMAND_KEY_PREFIX,
    TEXT_LIMIT,
    Containment,
    audit_key,
    command_key,
    command_scope,
    counted,
    invalid_containment,
    refused_on_read,
    take,
)
from ledger_stream.domain.keys import InvalidKeyError, operation_key
from ledger_stream.domain.values import replace
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.clients import Consumer, Producer
from ledger_stream.kafka.exceptions import DeliveryFailed, KafkaSetupError, kafka_error_text
from ledger_stream.kafka.offsets import committed_offsets
from ledger_stream.kafka.producer import producer_config, refuse_if_forbidden
from ledger_stream.kafka.receipts import partition_records
from ledger_stream.operate import audit
from ledger_stream.operate.audit import Actor
from ledger_stream.operate.free_text import payment_detail_problem
from ledger_stream.serde import AvroCodec, DecodeError

TXN_TIMEOUT_MS = 10_000
REASON_LIMIT = TEXT_LIMIT  # the processors' limit (invalid_containment), not a second one


class ContainmentRefused(ValueError):
    """The action, tenant or reason cannot be frozen as given (says why)."""


@dataclass(frozen=True)
class FreezeRecord:
    """A freeze as the log holds it (partition 0's copy)."""

    event: ev.Containment
    offset: int
    timestamp_ms: int
    counts: bool = True  # it counts for repeats (domain/containment.py ``counted``)
    poison: str = ""  # why the processors refuse it before deciding (refused_on_read)

    @property
    def scope(self) -> str:
        return command_scope(self.event)


def checked(action: str, tenant: str, reason: str) -> None:
    """ContainmentRefused unless ``action`` and ``tenant`` (empty: every tenant) are valid
    key parts and ``reason`` fits."""
    if tenant == "*":
        raise ContainmentRefused("tenant '*': leave --tenant out to freeze every tenant")
    try:
        operation_key(tenant or "any", action, "freeze")
    except InvalidKeyError as exc:
        raise ContainmentRefused(f"action {action!r} / tenant {tenant!r}: {exc}") from exc
    _reason_checked(reason)


def _reason_checked(reason: str) -> None:
    if len(reason) > REASON_LIMIT:
        raise ContainmentRefused(f"reason longer than {REASON_LIMIT} characters")
    problem = payment_detail_problem("the reason", reason)
    if problem:
        raise ContainmentRefused(problem)


def send(settings: Settings, bootstrap: str, codec: AvroCodec, *, action: str, tenant: str,
         frozen: bool, actor: Actor, mode: ev.FreezeMode = ev.FreezeMode.HOLD,
         reason: str = "", event_id: str = "", workflow: tuple[str, str] | None = None
         ) -> tuple[ev.Containment, dict[int, int]]:
    """Write the freeze (or unfreeze) to every partition of the attempts topic, in one
    transaction, and wait for it to commit. Returns the event (partition 0's copy) and each
    copy's offset by partition. ``actor``'s audit record is written first: AuditNotWritten,
    and nothing sent, when it cannot be (audit.py). DeliveryFailed when it did not commit,
    or its outcome is unknown: running it again with the same ``event_id`` is safe either
    way (a processor that applied the command ignores the repeat). ``workflow``: (graph,
    version) for a freeze scoped by workflow version (``action`` and ``tenant`` empty)."""
    graph, version = workflow or ("", "")
    if workflow is None:
        checked(action, tenant, reason)
    else:
        _reason_checked(reason)
    event = ev.Containment(event_id or new_event_id(), 0, action, tenant, frozen, mode,
                           reason, actor.who, 0, graph, version)
    # The processor's own check, before anything is sent: a copy it refuses is poison in
    # every partition, and the command would report a freeze no processor holds.
    why = invalid_containment(event)
    if why:
        raise ContainmentRefused(why)
    if workflow is not None and "version" not in codec.schemas.writer("Containment").fields:
        # An older release's schema would drop graph and version: every processor would
        # refuse the copy as an action freeze naming no action, and the hold be reported
        # in force while holding nothing.
        raise ContainmentRefused("a hold by workflow version needs this release's event "
                                 "schemas; this process writes an older release's "
                                 "(LEDGER_WRITE_SCHEMAS): finish the upgrade first")
    partitions = _partitions(bootstrap, settings.topic("attempts"))
    what = ev.AuditAction.FREEZE if frozen else ev.AuditAction.UNFREEZE
    audit.record(settings, bootstrap, codec, actor, what,
                 audit_key(command_scope(event)), event.event_id,
                 f"mode {mode.value}" if frozen else "")
    now = int(time.time() * 1000)
    copies = [replace(event, partition=p, at_ms=now) for p in range(partitions)]
    offsets = _send_atomically(bootstrap, settings.topic("attempts"),
                               command_key(event.event_id, uuid.uuid4().hex),
                               [codec.encode(copy) for copy in copies])
    return copies[0], offsets


def _send_atomically(bootstrap: str, topic: str, key: bytes, values: list[bytes]
                     ) -> dict[int, int]:
    """Write ``values[p]`` to partition ``p`` of ``topic``, all in one transaction: every
    partition's processor (a read-committed reader) sees the command, or none does. A copy
    sent to some partitions only, retried after someone else froze or unfroze the scope,
    would leave the partitions deciding under different freezes. Returns each copy's offset
    by partition; DeliveryFailed otherwise, saying whether the transaction was aborted or
    its outcome is unknown. A command killed mid-way is aborted by the broker after
    TXN_TIMEOUT_MS (plus its abort check, 10 s by default): the processors' reads of the
    attempts topic wait that long at most."""
    refuse_if_forbidden(f"to {topic}")
    producer = Producer(transactional_config(bootstrap))
    delivered: dict[int, int] = {}
    failures: list[str] = []

    def report(error: KafkaError | None, msg: Message) -> None:
        if error is not None:
            failures.append(error.str())
        else:
            delivered[int(msg.partition() or 0)] = int(msg.offset() or 0)

    opened = committed = False
    try:
        producer.init_transactions(TXN_TIMEOUT_MS / 1000)
        deadline = time.monotonic() + TXN_TIMEOUT_MS / 1000
        producer.begin_transaction()
        opened = True
        for partition, value in enumerate(values):
            producer.produce(topic, value=value, key=key, partition=partition,
                             on_delivery=report)
        while not committed:
            try:
                producer.commit_transaction(max(0.1, deadline - time.monotonic()))
                committed = True
            except KafkaException as exc:  # a retriable error: the same commit again
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) \
                    else None
                if error is None or not error.retriable() or time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
    except KafkaException as exc:
        if not opened:
            outcome = "did not start: no partition has it"
        elif _aborted(producer):
            outcome = "was aborted: no partition has it"
        else:
            outcome = "has an unknown outcome: it may be in every partition or in none"
        detail = "; ".join([kafka_error_text(exc), *failures[:3]])
        raise DeliveryFailed(f"the command's transaction {outcome} ({detail})") from exc
    except BaseException:  # SIGTERM's SystemExit, Ctrl-C: no reader should wait for it
        if opened and not committed:
            _aborted(producer)
        raise
    finally:
        with contextlib.suppress(KafkaException):  # the outcome above is what counts
            producer.flush(1)
    if failures or len(delivered) != len(values):
        raise DeliveryFailed(f"copies not acknowledged: {'; '.join(failures[:3])}")
    return delivered


def transactional_config(bootstrap: str) -> dict[str, object]:
    """The producer of one command: its own transactional id, and a message timeout no
    longer than the transaction's (librdkafka refuses a longer one, which a deployment's
    ``kafka_client`` may set: every freeze would fail)."""
    return producer_config(bootstrap, **{
        "transactional.id": f"ledger-containment-{uuid.uuid4().hex}",
        "transaction.timeout.ms": TXN_TIMEOUT_MS,
        "message.timeout.ms": TXN_TIMEOUT_MS})


def _aborted(producer: Producer) -> bool:
    try:
        producer.abort_transaction(5)
        return True
    except KafkaException:
        return False


def new_event_id() -> str:
    return f"freeze-{uuid.uuid4().hex}"


def not_applied(settings: Settings, bootstrap: str, offsets: dict[int, int],
                wait_s: float) -> list[int]:
    """The partitions whose processor has not applied its copy (its consumer group,
    ``settings.processor.consumer_group``, has not committed past the copy's offset) within
    ``wait_s`` seconds; [] once every partition's has. A committed offset is the end of a
    checkpoint: the decisions up to it, the freeze's included, are in force."""
    topic = settings.topic("attempts")
    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "group.id": settings.processor.consumer_group,  # read, never joined
                         "enable.auto.commit": False})
    deadline = time.monotonic() + wait_s
    try:
        while True:
            committed = committed_offsets(
                consumer, [TopicPartition(topic, p) for p in sorted(offsets)], 10)
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
    prefix = COMMAND_KEY_PREFIX.encode()
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
        found.append(FreezeRecord(event, record.offset, record.timestamp_ms,
                                  counted(record.key), refused_on_read(event, record.key, 0)))
    return found


def active(records: list[FreezeRecord], skip: dict[int, str] | None = None
           ) -> list[FreezeRecord]:
    """The freezes in force after ``records``, in the order they were first frozen (a
    freeze of a frozen scope updates it in place), by the processors' rules: a record that
    repeats a command applied already (a retry), or that a processor refuses (past the
    scopes it keeps, or invalid), changes nothing. ``skip``: ``ignored(records)``, when the
    caller has it already."""
    skip = ignored(records) if skip is None else skip
    scopes: dict[str, FreezeRecord] = {}
    for record in records:
        if record.offset in skip:
            continue
        if record.event.frozen:
            scopes[record.scope] = record
        else:
            scopes.pop(record.scope, None)
    return list(scopes.values())


def ignored(records: list[FreezeRecord]) -> dict[int, str]:
    """The offsets of the records the processors ignore, and why: ``repeat`` (a command
    applied before them, retried) or ``refused: ...`` (poison to them: dead-lettered with
    a ``poison_input`` alert). The processors' own rules (``refused_on_read`` and ``take`` in
    domain/containment.py, which the processor's step runs), replayed over partition 0's
    copies."""
    held = Containment()
    found: dict[int, str] = {}
    for record in records:
        invalid = invalid_containment(record.event)  # a record built without log()'s check
        why = record.poison or (f"invalid Containment: {invalid}" if invalid else "")
        if why:
            found[record.offset] = f"refused: {why}"
            continue
        outcome = take(held, record.event, record.timestamp_ms, record.counts)
        if outcome.repeat:
            found[record.offset] = "repeat"
        elif outcome.refused:
            found[record.offset] = f"refused: {outcome.refused}"
        else:
            held = outcome.containment
    return found


def _partitions(bootstrap: str, topic: str, patience_s: float = 5.0) -> int:
    """The topic's partition count; asked again for ``patience_s`` while the broker does
    not know the topic (just created: its metadata is still spreading)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CLIENT_CONFIG,
                         "group.id": f"freeze-{uuid.uuid4().hex}"})
    deadline = time.monotonic() + patience_s
    try:
        while True:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            if meta.error is None and meta.partitions:
                return len(meta.partitions)
            if time.monotonic() >= deadline:
                raise KafkaSetupError(f"{topic} is not available ({meta.error}): run "
                                      "`ledger-stream topics create` with the same settings")
            time.sleep(0.2)
    finally:
        consumer.close()
