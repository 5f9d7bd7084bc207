"""Following one submit's answer among a key's receipts, and saying it on the submit's span.

Shared by the client's ledger path and its receipt-cache path (cached_answers.py).
"""

from __future__ import annotations

from ledger_stream import tracing
from ledger_stream.domain import events as ev
from ledger_stream.domain.values import replace

PENDING = frozenset({ev.ReceiptStatus.ACCEPTED, ev.ReceiptStatus.IN_PROGRESS,
                     ev.ReceiptStatus.RECONCILING})


def span_attributes(intent: ev.Intent) -> dict[str, str]:
    """Ids and hashes only: never the arguments."""
    return {"ledger.operation_key": intent.key, "ledger.intent_event_id": intent.event_id,
            "ledger.args_hash": intent.args_hash, "ledger.origin": intent.origin.value}


def answered(span: object, receipt: ev.Receipt, traces: dict[str, tracing.Headers]) -> None:
    """The answer on the submit span, linked to the hop that produced it (the connector's
    call, when the receipt settles an effect)."""
    if span is None:
        return
    tracing.annotate(span, **{"ledger.receipt.status": receipt.status.value,
                              "ledger.receipt.reason": receipt.reason.value})
    tracing.link(span, traces.get(receipt.receipt_id, ()), **{"ledger.receipt_id":
                                                              receipt.receipt_id})
    if receipt.status in (ev.ReceiptStatus.REJECTED, ev.ReceiptStatus.FAILED):
        tracing.failed(span, f"{receipt.status.value}: {receipt.reason.value}")


class Follow:
    """Our answer among a key's receipts, then the key's changes until one is terminal."""

    def __init__(self, intent: ev.Intent) -> None:
        self._intent = intent
        self._answer: ev.Receipt | None = None

    @property
    def done(self) -> bool:
        return self._answer is not None and self._answer.status not in PENDING

    def take(self, receipts: list[ev.Receipt]) -> None:
        for receipt in receipts:
            if self.done:
                return
            if self._answer is None and receipt.intent_event_id != self._intent.event_id:
                continue  # written before our answer
            if self._answer is not None and receipt.status is not receipt.key_status:
                continue  # another intent's rejection: not a change of the key
            # A change of the key answers the intent that holds it; as our answer it names
            # our intent, so that ``answer`` reads already_done when that one is not ours.
            self._answer = receipt if receipt.intent_event_id == self._intent.event_id \
                else replace(receipt, intent_event_id=self._intent.event_id)

    def answer(self) -> ev.Receipt:
        """The terminal receipt, or the latest pending one; TimeoutError if none came."""
        if self._answer is None:
            raise TimeoutError(f"no receipt for {self._intent.key} within the wait; the "
                               "intent is recorded and will be decided: submit it again to ask")
        return self._answer
