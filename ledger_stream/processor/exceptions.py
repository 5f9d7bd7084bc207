"""Errors of the processor runtime. Kafka and store errors are wrapped with ``from exc``.

Only :class:`StartupRefused` and :class:`ProcessorError` itself end the process (with one
line saying why); a :class:`BatchAbandoned` is handled inside the loop: the batch is dropped
and its inputs are decided again.
"""

from __future__ import annotations

from typing import Literal

# Why a batch was dropped: the label of ``ledger_batches_abandoned_total`` (each series is
# created at 0 when the processor starts, so an alert rule sees the first increase).
AbandonKind = Literal["fenced", "aborted", "producer_fatal", "producer_wedged", "delivery",
                      "registry"]


class ProcessorError(Exception):
    """The processor cannot go on; the message says why, in one line."""


class StartupRefused(ProcessorError):
    """The topics are missing or configured so that decisions would not be safe (a client
    clock could decide); the message names the fix. Nothing was consumed."""


class BatchAbandoned(ProcessorError):
    """The current batch must not become durable: nothing of it is committed, its overlay is
    discarded and its inputs are read again from the committed offsets.

    ``kind`` labels the metric (one of :data:`AbandonKind`); ``await_rebalance`` says the
    consumer's generation is stale, so the loop waits for the group to settle before reading
    again; ``new_producer`` says the producer is unusable (fatal or wedged) and must be
    replaced.
    """

    def __init__(self, kind: AbandonKind, reason: str, *, await_rebalance: bool = False,
                 new_producer: bool = False) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.await_rebalance = await_rebalance
        self.new_producer = new_producer


class OutputTooLarge(Exception):
    """A decision would make a record Kafka refuses (a state row or an output past the
    producer's limit): nothing of it was applied. The message says which record and its
    size. The processor dead-letters the input that made it instead (never a stall)."""
