"""A connector instance's protocol options, checked once at start-up."""

from __future__ import annotations

from dataclasses import dataclass

from ledger_stream.domain.validation import MAX_LEASE_MS


@dataclass(frozen=True, slots=True)
class ConnectorOptions:
    """How one connector instance runs the connector protocol (docs/design.md).

    The lease asked for each attempt must cover the whole call, the time to record its
    outcome and the clock skew between this machine and the broker: the holder checks its
    lease before calling and never calls when the rest of the lease could not cover that.
    """

    instance_id: str = ""
    lease_ms: int = 30_000
    call_timeout_s: float = 10.0
    record_margin_s: float = 2.0  # time to produce the outcome and get its acknowledgement
    clock_skew_ms: int = 2_000  # how far this machine's clock may be from the broker's
    lookup_delay_s: float = 0.0  # the target's consistency window before "not found"
    lookup_patience_s: float = 30.0  # keep retrying a failing lookup this long (outages)
    answer_warn_s: float = 10.0  # log a claim still unanswered after this long
    max_in_flight: int = 256  # dispatches handled at once by this instance
    # Call before the grant arrives: only for a target that deduplicates by key, and only
    # for a dispatch that is live (read after assignment, younger than the max age), so a
    # settled attempt is never sent again after the target forgot its idempotency key.
    fast_path: bool = False
    fast_path_max_age_s: float = 60.0

    def check(self, target_deduplicates: bool) -> None:
        """Raise ValueError saying what is wrong with these options for this target."""
        needed_ms = (self.call_timeout_s + self.record_margin_s) * 1000 + self.clock_skew_ms
        if self.lease_ms < needed_ms:
            raise ValueError(
                f"the lease ({self.lease_ms} ms) must cover the call timeout, the record "
                f"margin and the clock skew ({needed_ms:.0f} ms)")
        if self.lease_ms > MAX_LEASE_MS:  # the processor would dead-letter every claim
            raise ValueError(f"the lease ({self.lease_ms} ms) may be at most "
                             f"{MAX_LEASE_MS} ms (a day)")
        if self.fast_path and not target_deduplicates:
            raise ValueError("the fast path needs a target that deduplicates by key")
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
