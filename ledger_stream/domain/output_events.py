"""The processor's output events: what goes to ``ledger.dispatch`` (Dispatch and the answers
to claims), ``ledger.receipts``, ``ledger.alerts`` and ``ledger.dlq``. Written-out
``__init__`` methods, as in ``events`` (which names them all)."""

from __future__ import annotations

from dataclasses import dataclass

from ledger_stream.domain.kinds import AlertKind, Answer, Reason, ReceiptStatus


@dataclass(frozen=True, slots=True, init=False)
class Dispatch:
    dispatch_id: str
    key: str
    attempt: int
    intent_event_id: str
    tenant: str
    action: str
    target: str
    args_json: str
    args_hash: str
    payload_json: str
    not_before_ms: int
    at_ms: int
    # A pre-grant: the lease end given with attempt 1 to the connector that commits this
    # dispatch's offset first and records a fenced claim (0: claim and wait for a Grant).
    lease_until_ms: int = 0

    def __init__(self, dispatch_id: str, key: str, attempt: int, intent_event_id: str, tenant: str,
                 action: str, target: str, args_json: str, args_hash: str, payload_json: str,
                 not_before_ms: int, at_ms: int, lease_until_ms: int = 0) -> None:
        object.__setattr__(self, "dispatch_id", dispatch_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "intent_event_id", intent_event_id)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "args_json", args_json)
        object.__setattr__(self, "args_hash", args_hash)
        object.__setattr__(self, "payload_json", payload_json)
        object.__setattr__(self, "not_before_ms", not_before_ms)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "lease_until_ms", lease_until_ms)


@dataclass(frozen=True, slots=True, init=False)
class Grant:
    key: str
    attempt: int
    claim_id: str
    lease_until_ms: int
    at_ms: int

    def __init__(self, key: str, attempt: int, claim_id: str, lease_until_ms: int,
                 at_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "lease_until_ms", lease_until_ms)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Held:
    key: str
    attempt: int
    claim_id: str
    lease_until_ms: int
    at_ms: int

    def __init__(self, key: str, attempt: int, claim_id: str, lease_until_ms: int,
                 at_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "lease_until_ms", lease_until_ms)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Reconcile:
    key: str
    attempt: int
    claim_id: str
    target: str
    at_ms: int

    def __init__(self, key: str, attempt: int, claim_id: str, target: str, at_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Done:
    key: str
    attempt: int
    claim_id: str
    at_ms: int

    def __init__(self, key: str, attempt: int, claim_id: str, at_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Receipt:
    receipt_id: str
    key: str
    intent_event_id: str  # the intent this receipt answers (or the reserving one)
    status: ReceiptStatus
    reason: Reason
    args_hash: str
    attempts: int
    at_ms: int
    external_id: str = ""
    detail: str = ""
    # The key's own status after this decision: equal to ``status`` for state changes, and
    # for a rejected or held intent the status of the key it could not touch ("rejected"
    # when no effect holds the key), so the latest receipt of a key always tells its state.
    key_status: ReceiptStatus = ReceiptStatus.ACCEPTED
    # For a receipt that answers an intent: which kind of run asked (the intent's origin).
    origin: str = ""
    # The intent that holds the key: the one whose effect this is ("" when nothing holds
    # the key, and on receipts written before this field).
    effect_intent_id: str = ""

    def __init__(self, receipt_id: str, key: str, intent_event_id: str, status: ReceiptStatus,
                 reason: Reason, args_hash: str, attempts: int, at_ms: int, external_id: str = "",
                 detail: str = "", key_status: ReceiptStatus = ReceiptStatus.ACCEPTED,
                 origin: str = "", effect_intent_id: str = "") -> None:
        object.__setattr__(self, "receipt_id", receipt_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "intent_event_id", intent_event_id)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "args_hash", args_hash)
        object.__setattr__(self, "attempts", attempts)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "external_id", external_id)
        object.__setattr__(self, "detail", detail)
        object.__setattr__(self, "key_status", key_status)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "effect_intent_id", effect_intent_id)

    def with_origin(self, origin: str) -> Receipt:
        """This receipt naming ``origin`` (``dataclasses.replace``, written out field by
        field as ``__init__`` is: each intent's answer gets its origin this way)."""
        return Receipt(
            receipt_id=self.receipt_id,
            key=self.key,
            intent_event_id=self.intent_event_id,
            status=self.status,
            reason=self.reason,
            args_hash=self.args_hash,
            attempts=self.attempts,
            at_ms=self.at_ms,
            external_id=self.external_id,
            detail=self.detail,
            key_status=self.key_status,
            origin=origin,
            effect_intent_id=self.effect_intent_id,
        )

    @property
    def state(self) -> ReceiptStatus:
        """The key's state: what the operation is, whoever asked (``key_status``)."""
        return self.key_status

    @property
    def answer(self) -> Answer:
        """What the intent this receipt answers got (``answer_to``)."""
        return self.answer_to(self.intent_event_id)

    def answer_to(self, intent_event_id: str) -> Answer:
        """What the intent ``intent_event_id`` got, read from this receipt: by its own
        status when the receipt answers it, else by the key's (a later change of the key).
        A settled key is ``created`` for the intent that holds it, ``already_done`` for
        any other; a receipt without ``effect_intent_id`` (written before it) names no
        holder, so it reads ``already_done``: never a second ``created``."""
        status = self.status if intent_event_id == self.intent_event_id else self.key_status
        if status is ReceiptStatus.REJECTED:
            return Answer.REJECTED
        if status is ReceiptStatus.HELD:
            return Answer.HELD
        if status not in (ReceiptStatus.SUCCEEDED, ReceiptStatus.FAILED):
            return Answer.PENDING
        if self.effect_intent_id and self.effect_intent_id == intent_event_id:
            return Answer.CREATED
        return Answer.ALREADY_DONE


@dataclass(frozen=True, slots=True, init=False)
class Alert:
    alert_id: str
    key: str
    kind: AlertKind
    source_event_id: str
    detail: str
    at_ms: int

    def __init__(self, alert_id: str, key: str, kind: AlertKind, source_event_id: str, detail: str,
                 at_ms: int) -> None:
        object.__setattr__(self, "alert_id", alert_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "source_event_id", source_event_id)
        object.__setattr__(self, "detail", detail)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class DeadLetter:
    topic: str
    partition: int
    offset: int
    reason: str
    at_ms: int
    key: bytes | None = None
    value: bytes | None = None

    def __init__(self, topic: str, partition: int, offset: int, reason: str, at_ms: int,
                 key: bytes | None = None, value: bytes | None = None) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)


DispatchMessage = Dispatch | Grant | Held | Reconcile | Done
OutputEvent = DispatchMessage | Receipt | Alert | DeadLetter
