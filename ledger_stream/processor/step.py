"""One input record through the ledger: read (decode, validate), decide, encode. Also the
Timers. No Kafka and no store here: the caller passes the record's fields, the partition
clock and a :class:`StateView` over the partition's state.

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
from typing import Any, Protocol

from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import Decision, decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, Phase, absent
from ledger_stream.domain.validation import invalid_reason
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.logs import log_fields
from ledger_stream.processor import metrics
from ledger_stream.serde import AvroCodec, DecodeError

logger = logging.getLogger(__name__)

INTENT_TYPES: tuple[type[Any], ...] = (ev.Intent,)
ATTEMPT_TYPES: tuple[type[Any], ...] = (
    ev.AttemptClaim, ev.AttemptOutcome, ev.ReconcileResult, ev.OperatorResolution, ev.Tick,
)

Readable = ev.InputEvent | ev.Tick


class StateView(Protocol):
    """One partition's key states as the batch sees them (its overlay over the store)."""

    def state(self, key: str) -> KeyState: ...

    def put(self, key: str, before: KeyState, after: KeyState) -> None: ...


@dataclass(frozen=True, slots=True)
class Out:
    """One record to produce: which ledger topic ("dispatch", ...), key and value bytes."""

    topic: str
    key: bytes | None
    value: bytes


_TOPIC_OF: dict[type[Any], str] = {
    ev.Dispatch: "dispatch", ev.Grant: "dispatch", ev.Held: "dispatch",
    ev.Reconcile: "dispatch", ev.Done: "dispatch", ev.Receipt: "receipts",
    ev.Alert: "alerts", ev.DeadLetter: "dlq",
}


class LedgerStep:
    def __init__(self, policy: Policy, codec: AvroCodec, topics: dict[str, str],
                 partitions: int) -> None:
        """``topics`` maps full input topic names to "intents" or "attempts";
        ``partitions`` is their (shared) partition count."""
        self.policy = policy
        self._codec = codec
        self._partitions = partitions
        self._expect = {
            name: INTENT_TYPES if role == "intents" else ATTEMPT_TYPES
            for name, role in topics.items()
        }

    def read(self, value: bytes | None, key: bytes | None, topic: str, partition: int,
             offset: int, now_ms: int) -> Readable:
        """The record's event, or the PoisonInput saying why it is none."""

        def poison(reason: str) -> ev.PoisonInput:
            return ev.PoisonInput(topic, partition, offset, reason, max(now_ms, 1), key, value)

        if key is None:
            return poison("null message key")
        try:
            key_text = key.decode("utf-8")
        except UnicodeDecodeError:
            return poison("message key is not UTF-8")
        if value is None:
            return poison("empty message value (tombstone)")
        try:
            event = self._codec.decode(value, self._expect.get(topic, ATTEMPT_TYPES))
        except DecodeError as exc:
            return poison(f"undecodable: {exc}")
        if isinstance(event, ev.Tick):  # written to an explicit partition, which it names
            if event.partition != partition:
                return poison(f"Tick for partition {event.partition} read from {partition}")
            return event
        # Another partitioner would give one key a second, independent state here.
        home = partition_for(key, self._partitions)
        if home != partition:
            return poison(f"record in partition {partition}, its key belongs to {home}")
        reason = invalid_reason(event, key_text)
        if reason is not None:
            return poison(f"invalid {type(event).__name__}: {reason}")
        result: ev.InputEvent = event
        return result

    def decide(self, view: StateView, event: ev.InputEvent, now_ms: int) -> list[Out]:
        """Decide ``event`` at partition time ``now_ms``; the new state goes to ``view``."""
        started = time.perf_counter()
        if isinstance(event, ev.PoisonInput):
            key_text = event.key.decode("utf-8", "replace") if event.key else ""
            state = absent(key_text)
            decision = decide(state, event, self.policy, now_ms)
            _child(metrics.DLQ, event.topic).inc()
            out_key = event.key
        else:
            key_text = event.key
            state = view.state(key_text)
            decision = decide(state, event, self.policy, now_ms)
            if decision.state is not state:
                view.put(key_text, state, decision.state)
                _count_operator_queue(state.phase, decision.state.phase)
            out_key = key_text.encode("utf-8")
        outs = [Out(_TOPIC_OF[type(o)], out_key, self._codec.encode(o))
                for o in decision.outputs]
        outcome = _count(event, decision)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("decided", extra=log_fields(
                key=key_text, event=type(event).__name__,
                event_id=getattr(event, "event_id", ""), outcome=outcome,
                phase=f"{state.phase.value}->{decision.state.phase.value}",
                outputs=[type(o).__name__ for o in decision.outputs]))
        if not isinstance(event, ev.Timer):
            metrics.DECISION_SECONDS.observe(time.perf_counter() - started)
        return outs

    def timer(self, view: StateView, key: str, due_ms: int, now_ms: int) -> list[Out]:
        """A key's deadline has come: decide its Timer (a stale one changes nothing)."""
        kind = _TIMER_KIND.get(view.state(key).phase, "stale")
        _child(metrics.TIMERS, kind).inc()
        return self.decide(view, ev.Timer(key, due_ms), now_ms)

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


def _count_operator_queue(before: Phase, after: Phase) -> None:
    if after is Phase.NEEDS_OPERATOR and before is not Phase.NEEDS_OPERATOR:
        metrics.OPERATOR_QUEUE.inc()
    elif before is Phase.NEEDS_OPERATOR and after is not Phase.NEEDS_OPERATOR:
        metrics.OPERATOR_QUEUE.dec()


def _count(event: ev.InputEvent, decision: Decision) -> str:
    """Count the decision in the metrics; its outcome label."""
    outcome = "applied"
    for out in decision.outputs:
        if isinstance(out, ev.Alert):
            _child(metrics.ALERTS, out.kind.value).inc()
            if out.kind is ev.AlertKind.CONFLICTING_ARGUMENTS:
                metrics.CONFLICTS.inc()
        if isinstance(event, ev.Intent) and isinstance(out, ev.Receipt) \
                and out.intent_event_id == event.event_id:
            outcome = out.reason.value if out.reason is not ev.Reason.NONE else out.status.value
            if not any(isinstance(o, ev.Dispatch) for o in decision.outputs) \
                    and out.status is not ev.ReceiptStatus.REJECTED \
                    and out.status is not ev.ReceiptStatus.HELD:
                outcome = "duplicate"
                metrics.DUPLICATES_SUPPRESSED.inc()
    if isinstance(event, ev.PoisonInput):
        outcome = "poison"
    _child(metrics.DECISIONS, type(event).__name__, outcome).inc()
    return outcome
