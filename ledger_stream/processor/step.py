"""One input message through the ledger: decode, decide, encode. The runtime-independent
heart of the processor (the quixstreams wiring is in app.py).

A message that cannot be decoded or validated is data, not an exception: it becomes a DLQ
record and a ``poison_input`` alert, the key's state is not touched, and processing goes on.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Protocol

from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import Decision, decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, Phase, absent
from ledger_stream.domain.validation import invalid_reason
from ledger_stream.processor import metrics
from ledger_stream.serde import AvroCodec, DecodeError

STATE_KEY = "s"

INTENT_TYPES: tuple[type[Any], ...] = (ev.Intent,)
ATTEMPT_TYPES: tuple[type[Any], ...] = (
    ev.AttemptClaim, ev.AttemptOutcome, ev.ReconcileResult, ev.OperatorResolution,
)


class KeyStore(Protocol):
    """The per-key state the runtime hands in, already scoped to the message key."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...


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
    def __init__(self, policy: Policy, codec: AvroCodec, topics: dict[str, str]) -> None:
        """``topics`` maps full input topic names to "intents" or "attempts"."""
        self._policy = policy
        self._codec = codec
        self._expect = {
            name: INTENT_TYPES if role == "intents" else ATTEMPT_TYPES
            for name, role in topics.items()
        }

    def handle(self, value: bytes | None, key: bytes | None, topic: str, partition: int,
               offset: int, timestamp_ms: int, store: KeyStore) -> list[Out]:
        started = time.perf_counter()
        event_or_poison = self._read(value, key, topic, partition, offset, timestamp_ms)
        if isinstance(event_or_poison, ev.PoisonInput):
            key_text = key.decode("utf-8", "replace") if key else ""
            decision = decide(absent(key_text), event_or_poison, self._policy)
            _child(metrics.DLQ, topic).inc()
        else:
            raw = store.get(STATE_KEY)
            state = KeyState.from_row(raw) if raw else absent(event_or_poison.key)
            decision = decide(state, event_or_poison, self._policy)
            if decision.state is not state:
                store.set(STATE_KEY, decision.state.to_row())
                _count_operator_queue(state.phase, decision.state.phase)
        outs = [
            Out(_TOPIC_OF[type(o)], key, self._codec.encode(o)) for o in decision.outputs
        ]
        _count(event_or_poison, decision)
        metrics.DECISION_SECONDS.observe(time.perf_counter() - started)
        return outs

    def _read(self, value: bytes | None, key: bytes | None, topic: str, partition: int,
              offset: int, timestamp_ms: int) -> ev.InputEvent:
        def poison(reason: str) -> ev.PoisonInput:
            return ev.PoisonInput(topic, partition, offset, reason, max(timestamp_ms, 1),
                                  key, value)

        if value is None:
            return poison("empty message value (tombstone)")
        try:
            key_text = key.decode("utf-8") if key is not None else None
        except UnicodeDecodeError:
            return poison("message key is not UTF-8")
        try:
            event = self._codec.decode(value, self._expect.get(topic, ATTEMPT_TYPES))
        except DecodeError as exc:
            return poison(f"undecodable: {exc}")
        reason = invalid_reason(event, key_text)
        if reason is not None:
            return poison(f"invalid {type(event).__name__}: {reason}")
        result: ev.InputEvent = event
        return result


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


def _count(event: ev.InputEvent, decision: Decision) -> None:
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
