"""What ``LedgerClient.submit`` raises instead of returning a receipt that means "no"."""

from __future__ import annotations

from ledger_stream.domain.events import Reason, Receipt, ReceiptStatus
from ledger_stream.history.detail import shown_detail


class InvalidIntentError(ValueError):
    """The intent would be dead-lettered by the ledger (e.g. its action is not its key's);
    raised before anything is produced."""


class LedgerError(Exception):
    """Base class; ``receipt`` is the ledger's answer that caused it."""

    def __init__(self, receipt: Receipt, message: str) -> None:
        super().__init__(message)
        self.receipt = receipt


class ConflictError(LedgerError):
    """The key holds other material arguments. No effect was applied for this intent."""


class ApprovalError(LedgerError):
    """The approval was missing, forged, expired or for other arguments. No effect."""


class ExpiredKeyError(LedgerError):
    """The key was sealed after its replay window; it never becomes new work."""


class VersionHeldError(LedgerError):
    """An incompatible workflow version holds the key in flight; this intent was held."""


class FrozenError(LedgerError):
    """The action is frozen (containment). As ``held``: the intent is recorded and the
    ledger applies it once the action is unfrozen; do not ask again under another key. As
    ``rejected``: the partition's hold queue was full, nothing was recorded: ask again
    after the unfreeze."""


class NeedsReconciliation(LedgerError):
    """The outcome is unknown and the target cannot tell: an operator must decide."""


class EffectFailed(LedgerError):
    """The effect failed for good (the target refused it, or the attempts ran out)."""


_BY_REASON = {
    Reason.CONFLICT: ConflictError,
    Reason.APPROVAL: ApprovalError,
    Reason.EXPIRED_KEY: ExpiredKeyError,
    Reason.VERSION: VersionHeldError,
    Reason.FROZEN: FrozenError,
}


def raise_for(receipt: Receipt) -> Receipt:
    """Return ``receipt`` if it is a success or still pending; raise the matching error."""
    status = receipt.status
    if status in (ReceiptStatus.REJECTED, ReceiptStatus.HELD):
        error = _BY_REASON.get(receipt.reason, LedgerError)
        raise error(receipt, f"{receipt.key}: {status.value} ({receipt.reason.value}): "
                             f"{shown_detail(receipt.detail)}")
    if status is ReceiptStatus.NEEDS_RECONCILIATION:
        raise NeedsReconciliation(receipt, f"{receipt.key}: outcome unknown, waiting for an "
                                           f"operator: {shown_detail(receipt.detail)}")
    if status is ReceiptStatus.FAILED:
        raise EffectFailed(receipt, f"{receipt.key}: failed ({receipt.reason.value}): "
                                    f"{shown_detail(receipt.detail)}")
    return receipt


class LedgerUnavailable(ConnectionError):
    """Kafka could not be reached, or did not acknowledge the intent in time. Nothing is
    known to be decided: an intent not acknowledged may still reach the ledger later, and
    submitting it again is safe (the ledger answers a repeat with the original outcome)."""


class StaleStatusError(Exception):
    """The receipts view had not applied the key's partition up to the receipts written
    before ``status`` was called, within the wait. Nothing is wrong with the key; ask again."""

    def __init__(self, key: str, position: int, wanted: int) -> None:
        super().__init__(f"{key}: the view is at offset {position} of the key's partition, "
                         f"not yet at {wanted}")
        self.key, self.position, self.wanted = key, position, wanted


class StaleTimelineError(Exception):
    """The view had not applied the key's partitions of every ledger topic up to the records
    written before the timeline or evidence was asked for, within the wait. Nothing is wrong
    with the key; ask again."""

    def __init__(self, key: str, positions: dict[str, int]) -> None:
        where = ", ".join(f"{tp}@{offset}" for tp, offset in sorted(positions.items()))
        super().__init__(f"{key}: the view's timeline has not caught up (it is at {where})")
        self.key, self.positions = key, positions


class ViewUnavailableError(Exception):
    """The receipts view (LEDGER_VIEW_URL) could not be asked."""


class NoTimelineError(ViewUnavailableError):
    """The view was started with --no-timeline: ask the topics instead."""
