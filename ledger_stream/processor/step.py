"""One input record through the ledger: read (decode, validate), decide, encode. Also the
Timers. No Kafka and no store here: the caller passes the record's fields, the partition
clock and a :class:`StateView` over the partition's state.

Containment records (an operator's freeze or unfreeze) change the partition's containment
(kept with its state) and release the keys an unfreeze frees, in the order they were held.

A record that cannot be read is data, not an exception: it becomes a PoisonInput, which
``decide`` turns into a DLQ record and a ``poison_input`` alert without reading or writing
any key's state. Poison: a null key, a key that is not UTF-8, a record in a partition that
is not its key's (murmur2), a tombstone, undecodable bytes, an event type not allowed on its
topic, an event failing ``invalid_reason``, a Tick naming another partition.

A schema registry that cannot be reached is not poison: ``SchemaRegistryUnavailable``
propagates, so the runtime retries the same records later.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ledger_stream import tracing
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import (
    Containment,
    Hold,
    command_scope,
    counted,
    refused_on_read,
)
from ledger_stream.domain.containment import take as contain_command
from ledger_stream.domain.decide import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, Phase, absent
from ledger_stream.domain.validation import invalid_reason
from ledger_stream.kafka.partitioner import key_partition
from ledger_stream.logs import log_fields
from ledger_stream.processor import metrics
from ledger_stream.processor.exceptions import OutputTooLarge
from ledger_stream.processor.limits import (
    ERROR_TEXT_MAX,
    INPUT_ROOM,
    MADE_HERE,
    RECORD_ROOM,
    REPORTS,
    error_cut,
    oversized,
)
from ledger_stream.serde import AvroCodec, DecodeError
from ledger_stream.state.rows import encode_row, row_texts_too_large

logger = logging.getLogger(__name__)

INTENT_TYPES: tuple[type[Any], ...] = (ev.Intent,)
ATTEMPT_TYPES: tuple[type[Any], ...] = (
    ev.AttemptClaim, ev.AttemptOutcome, ev.ReconcileResult, ev.OperatorResolution, ev.Tick,
    ev.Containment,
)
PARTITIONED = (ev.Tick, ev.Containment)  # written to an explicit partition, which they name

@dataclass(frozen=True, slots=True)
class Forward:
    """A record a producer placed under the partition count before ``repartition``: it goes,
    unchanged, to its key's partition now (``role`` "intents" or "attempts"), to be decided
    there by the owner of the key's state, instead of the DLQ."""

    role: str
    partition: int


Readable = ev.InputEvent | ev.Tick | ev.Containment | Forward


class StateView(Protocol):
    """One partition's key states as the batch sees them (its overlay over the store)."""

    def state(self, key: str) -> KeyState: ...

    def put(self, key: str, before: KeyState, after: KeyState, row: bytes) -> None:
        """``after`` replaces ``before``; ``row``: its encoded row (``encode_row``)."""

    def containment(self) -> Containment: ...

    def put_containment(self, containment: Containment) -> None: ...


class Out(NamedTuple):
    """One record to produce: which ledger topic ("dispatch", ...), key and value bytes,
    and the trace headers of the input it answers (tracing.py: passed through). A tuple:
    the loop builds about two per decision, and a frozen dataclass costs four times as
    much to build."""

    topic: str
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int | None = None  # None: the key's partition (the producer's partitioner)


# An Out built without the Python-level ``__new__`` of a NamedTuple (half its cost), for
# the outputs of every decision: ``_new_out(Out, (topic, key, value, headers, None))``.
_new_out = tuple.__new__

_TOPIC_OF: dict[type[Any], str] = {
    ev.Dispatch: "dispatch", ev.Grant: "dispatch", ev.Held: "dispatch",
    ev.Reconcile: "dispatch", ev.Done: "dispatch", ev.Receipt: "receipts",
    ev.Alert: "alerts", ev.DeadLetter: "dlq",
}




class LedgerStep:
    def __init__(self, policy: Policy, codec: AvroCodec, topics: dict[str, str],
                 partitions: int, grown_from: int | None = None) -> None:
        """``topics`` maps full input topic names to "intents" or "attempts";
        ``partitions`` is their (shared) partition count; ``grown_from`` the count before
        the last ``repartition`` (records placed under it are forwarded, not poison)."""
        self.policy = policy
        self._roles = topics
        self._grown_from = grown_from
        self._codec = codec
        self._partitions = partitions
        self._expect = {
            name: INTENT_TYPES if role == "intents" else ATTEMPT_TYPES
            for name, role in topics.items()
        }
        # What the decisions count, added to the metrics when the batch flushes it (the
        # batch's records all decided): per batch, not per record.
        self.tally = metrics.Tally()

    def read(self, value: bytes | None, key: bytes | None, topic: str, partition: int,
             offset: int, now_ms: int) -> Readable:
        """The record's event, or the PoisonInput saying why it is none."""
        if key is None:
            return _poison(topic, partition, offset, "null message key", now_ms, key, value)
        try:
            key_text = key.decode("utf-8")
        except UnicodeDecodeError:
            return _poison(topic, partition, offset, "message key is not UTF-8", now_ms, key,
                           value)
        if value is None:
            return _poison(topic, partition, offset, "empty message value (tombstone)",
                           now_ms, key, value)
        try:
            event = self._codec.decode(value, self._expect.get(topic, ATTEMPT_TYPES))
        except DecodeError as exc:
            return _poison(topic, partition, offset, f"undecodable: {exc}", now_ms, key, value)
        if isinstance(event, PARTITIONED):
            why = ""
            if isinstance(event, ev.Containment):
                why = refused_on_read(event, key, partition)
            elif event.partition != partition:
                why = (f"{type(event).__name__} for partition {event.partition} "
                       f"read from {partition}")
            return _poison(topic, partition, offset, why, now_ms, key, value) if why else event
        # Another partitioner would give one key a second, independent state here.
        home = key_partition(key, self._partitions)
        if home != partition:
            if self._grown_from and key_partition(key, self._grown_from) == partition:
                return Forward(self._roles.get(topic, "attempts"), home)
            return _poison(topic, partition, offset,
                           f"record in partition {partition}, its key belongs to {home}",
                           now_ms, key, value)
        reason = invalid_reason(event, key_text)
        if reason is None and isinstance(event, ev.Intent):
            reason = row_texts_too_large(event.args_json, event.payload_json)
        if reason is not None:
            return _poison(topic, partition, offset,
                           f"invalid {type(event).__name__}: {reason}", now_ms, key, value)
        if type(event) in REPORTS and len(event.error) > ERROR_TEXT_MAX:
            event = error_cut(event)
        result: ev.InputEvent = event
        return result

    def decide(self, view: StateView, event: ev.InputEvent, now_ms: int,
               sent_ms: int = 0, headers: tracing.Headers = (), appended_ms: int = 0
               ) -> list[Out]:
        """Decide ``event`` at partition time ``now_ms``; the new state goes to ``view``.
        ``sent_ms``: the wall time the outputs leave (``decide``'s: deadlines wait for them).
        ``headers``: the input's trace context, put on every output (tracing.py).
        ``appended_ms``: the broker timestamp of the event's own record (``decide``'s: a
        fenced claim is judged against the pre-grant's end by it; 0: ``now_ms``).

        Raises :class:`OutputTooLarge`, with nothing changed or counted, when Kafka would
        refuse one of the records the decision makes (its key's state row or an output);
        a PoisonInput's records always fit (``CARRIED_MAX``)."""
        started = time.perf_counter()
        if isinstance(event, ev.PoisonInput):
            key_text = event.key.decode("utf-8", "replace") if event.key else ""
            state = absent(key_text)
            decision = decide(state, event, self.policy, now_ms)
            out_key = event.key
        else:
            key_text = event.key
            state = view.state(key_text)
            containment = view.containment()
            hold = _hold(containment, state, event, key_text) if containment.freezes else None
            decision = decide(state, event, self.policy, now_ms, hold, sent_ms, appended_ms)
            out_key = key_text.encode("utf-8")
        # One pass over the outputs: each encoded into its Out (headers and all), what the
        # metrics count and the longest value noted on the way.
        encode, outs = self._codec.encode, []
        alerts: list[ev.Alert] = []
        answers: list[ev.Receipt] = []  # receipts answering this intent (one, or none)
        dispatched, longest = False, 0
        answering = event.event_id if isinstance(event, ev.Intent) else None
        for output in decision.outputs:
            value = encode(output)
            if len(value) > longest:
                longest = len(value)
            outs.append(_new_out(Out, (_TOPIC_OF[type(output)], out_key, value, headers, None)))
            if isinstance(output, ev.Receipt):
                if output.intent_event_id == answering:
                    answers.append(output)
            elif isinstance(output, ev.Dispatch):
                dispatched = True
            elif isinstance(output, ev.Alert):
                alerts.append(output)
        if isinstance(event, ev.PoisonInput):
            self.tally.add(_child(metrics.DLQ, event.topic))
        else:
            after = decision.state
            # The row encoded here is the one the checkpoint writes (never encoded again).
            row = encode_row(after) if after is not state else None
            if row is not None and len(row) > longest:
                longest = len(row)
            # An input's decision leaves room for what the processor decides later.
            room = RECORD_ROOM if type(event) in MADE_HERE else INPUT_ROOM
            if longest > room - 4 * len(key_text):  # rare: the exact check
                _refuse(outs, row, key_text, room)
            if row is not None:
                self._apply(view, key_text, state, after, containment, row)
        outcome = _count(self.tally, event, alerts, answers, dispatched)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("decided", extra=log_fields(
                key=key_text, event=type(event).__name__,
                event_id=getattr(event, "event_id", ""), outcome=outcome,
                phase=f"{state.phase.value}->{decision.state.phase.value}",
                outputs=[type(o).__name__ for o in decision.outputs]))
        if not isinstance(event, ev.Timer):
            self.tally.seconds.append(time.perf_counter() - started)
        return outs

    def _apply(self, view: StateView, key: str, before: KeyState, after: KeyState,
               containment: Containment, row: bytes) -> None:
        """Put ``after`` (encoded: ``row``) in ``view``, with the containment a hold moves."""
        view.put(key, before, after, row)
        was, now = before.phase, after.phase
        if was is not now and Phase.NEEDS_OPERATOR in (was, now):
            _count_operator_queue(self.tally, was, now)
        if was is Phase.HELD or now is Phase.HELD:  # a freeze holds or frees it
            before_by = before.held_by if was is Phase.HELD else ""
            after_by = after.held_by if now is Phase.HELD else ""
            if before_by != after_by:
                view.put_containment(containment.moved(key, before_by, after_by))

    def contain(self, view: StateView, event: ev.Containment, now_ms: int,
                where: tuple[str, int], record_key: bytes, sent_ms: int = 0) -> list[Out]:
        """An operator's freeze or unfreeze, at this point of the partition's log (``where``:
        its topic and offset): the partition's containment changes, and an unfreeze
        releases the keys its freeze held, in the order they were held (one held again by
        another freeze keeps its place). A freeze past FREEZE_LIMIT scopes is poison; a
        repeat of a command this partition applied already (a retry) changes nothing
        (``record_key``: the record's key, which says whether it counts for repeats)."""
        current = view.containment()
        scope = command_scope(event)
        counts = counted(record_key)
        outcome = contain_command(current, event, now_ms, counts)
        if outcome.repeat:  # a retried command, applied here already
            logger.info("freeze or unfreeze repeated, ignored", extra=log_fields(
                action=event.action, tenant=event.tenant or "*", event_id=event.event_id,
                partition=event.partition, frozen=event.frozen))
            metrics.CONTAINMENT.labels("repeat").inc()
            return []
        if outcome.refused:
            poison = ev.PoisonInput(where[0], event.partition, where[1], outcome.refused,
                                    max(now_ms, 1), record_key)
            return self.decide(view, poison, now_ms)
        released = outcome.released
        view.put_containment(outcome.containment)
        logger.info("freeze" if event.frozen else "unfreeze", extra=log_fields(
            scope=scope, action=event.action, tenant=event.tenant or "*",
            mode=event.mode.value, operator=event.operator, event_id=event.event_id,
            partition=event.partition, released=len(released)))
        metrics.CONTAINMENT.labels("freeze" if event.frozen else "unfreeze").inc()
        outs: list[Out] = []
        for key in released:
            outs.extend(self._made_here(view, ev.Release(key, scope), now_ms, sent_ms) or ())
        if released:  # entries of keys that had moved on are dropped too
            view.put_containment(view.containment().without_scope(scope))
        return outs

    def timer(self, view: StateView, key: str, due_ms: int, now_ms: int,
              sent_ms: int = 0) -> list[Out]:
        """A key's deadline has come: decide its Timer (a stale one changes nothing)."""
        kind = _TIMER_KIND.get(view.state(key).phase, "stale")
        outs = self._made_here(view, ev.Timer(key, due_ms), now_ms, sent_ms)
        if outs is not None:  # a refused one is not counted: it fires again next batch
            self.tally.add(_child(metrics.TIMERS, kind))
        return outs or []

    def dead_letter(self, view: StateView, record: tuple[str, int, int, bytes | None, bytes],
                    reason: str, now_ms: int) -> list[Out]:
        """The dead letter and alert of a readable ``record`` (topic, partition, offset,
        key, value) the processor cannot act on, for ``reason``; no key's state changes."""
        topic, partition, offset, key, value = record
        return self.decide(view, _poison(topic, partition, offset, reason, now_ms, key, value),
                           now_ms)

    def _made_here(self, view: StateView, event: ev.Timer | ev.Release, now_ms: int,
                   sent_ms: int) -> list[Out] | None:
        """Decide an event the processor makes (a deadline, a release): no record to
        dead-letter, so one whose records Kafka would refuse is not applied, and logged
        (None: nothing of it changed or counted)."""
        try:
            return self.decide(view, event, now_ms, sent_ms)
        except OutputTooLarge as exc:
            logger.error("decision not applied: Kafka would refuse its records", extra=log_fields(
                key=event.key, event=type(event).__name__, reason=str(exc)))
            return None

    def encode_tick(self, partition: int, instance: str, at_ms: int) -> bytes:
        return self._codec.encode(ev.Tick(partition, instance, at_ms))


_TIMER_KIND = {
    Phase.RESERVED: "stalled", Phase.DISPATCHED: "lease", Phase.RECONCILING: "reconcile",
    Phase.SUCCEEDED: "seal", Phase.FAILED: "seal",
}


@functools.cache
def _child(metric: Any, *labels: str) -> Any:
    """The labelled child of a metric, looked up once (``labels()`` costs a lock and a
    dict lookup per message)."""
    return metric.labels(*labels)


def _count_operator_queue(tally: metrics.Tally, before: Phase, after: Phase) -> None:
    if after is Phase.NEEDS_OPERATOR and before is not Phase.NEEDS_OPERATOR:
        tally.add(metrics.OPERATOR_QUEUE)
    elif before is Phase.NEEDS_OPERATOR and after is not Phase.NEEDS_OPERATOR:
        tally.add(metrics.OPERATOR_QUEUE, -1)


def _count(tally: metrics.Tally, event: ev.InputEvent, alerts: list[ev.Alert],
           answers: list[ev.Receipt], dispatched: bool) -> str:
    """Count the decision in ``tally``; its outcome label. ``alerts``: its alerts;
    ``answers``: its receipts that answer ``event`` (an intent); ``dispatched``: whether it
    sent a Dispatch."""
    # ``_value_``, not ``value``: the same string, without the Python-level property call.
    outcome = "applied"
    for alert in alerts:
        tally.add(_child(metrics.ALERTS, alert.kind._value_))
        if alert.kind is ev.AlertKind.CONFLICTING_ARGUMENTS:
            tally.add(metrics.CONFLICTS)
    for receipt in answers:
        outcome = receipt.reason._value_ if receipt.reason is not ev.Reason.NONE \
            else receipt.status._value_
        if not dispatched and receipt.status is not ev.ReceiptStatus.REJECTED \
                and receipt.status is not ev.ReceiptStatus.HELD:
            outcome = "duplicate"
            tally.add(metrics.DUPLICATES_SUPPRESSED)
    if isinstance(event, ev.PoisonInput):
        outcome = "poison"
    kind = type(event)
    series = _DECISION_SERIES.get((kind, outcome))
    if series is None:
        series = _DECISION_SERIES[(kind, outcome)] = _child(metrics.DECISIONS, kind.__name__,
                                                            outcome)
    counts = tally.counts  # Tally.add, inline: once per decision
    counts[series] = counts.get(series, 0) + 1
    return outcome


# The DECISIONS series of each (event type, outcome): one dict look-up per decision (the
# cache of ``_child`` hashes the metric and the type's name on each call).
_DECISION_SERIES: dict[tuple[type[Any], str], Any] = {}


# A dead letter carries the record's key and value, each up to this many bytes; past it,
# their start (the record stays in its topic at the offset the letter names). Whole, a
# record near Kafka's size limit made a dead letter (and, a key not UTF-8 decoded with
# replacements, an alert) over the producer's limit: the produce failed, the batch was
# abandoned, and every retry met the same record, so the processor stalled on it for good.
CARRIED_MAX = 64 * 1024


def _poison(topic: str, partition: int, offset: int, reason: str, now_ms: int,
            key: bytes | None, value: bytes | None) -> ev.PoisonInput:
    cut = [f"{what} of {len(data)} bytes" for what, data in (("key", key), ("value", value))
           if data is not None and len(data) > CARRIED_MAX]
    if cut:
        reason += f" (carries the first {CARRIED_MAX} bytes of its {' and '.join(cut)})"
        key = key[:CARRIED_MAX] if key is not None else None
        value = value[:CARRIED_MAX] if value is not None else None
    return ev.PoisonInput(topic, partition, offset, reason, max(now_ms, 1), key, value)


def _refuse(outs: list[Out], row: bytes | None, key: str, room: int) -> None:
    """Raise OutputTooLarge, nothing changed, if a record of the decision (its key's
    ``row``, its ``outs``) would not fit beside ``key`` in ``room`` bytes."""
    refused = oversized(outs, row, room - len(key.encode("utf-8")))
    if refused:
        raise OutputTooLarge(refused)


def _hold(containment: Containment, state: KeyState, event: ev.InputEvent, key: str
          ) -> Hold | None:
    """The freeze covering ``key`` (whose ``event`` this is), if any."""
    tenant, action = (state.tenant, state.action) if state.phase.live else (
        (event.tenant, event.action) if isinstance(event, ev.Intent) else ("", ""))
    # A new intent's workflow version, for the freezes by version: a key in flight under a
    # held version finishes.
    workflow = (event.workflow.graph, event.workflow.version) \
        if isinstance(event, ev.Intent) and not state.phase.in_flight else None
    return containment.hold_for(tenant, action, key,
                                state.held_by if state.phase is Phase.HELD else "", workflow)

