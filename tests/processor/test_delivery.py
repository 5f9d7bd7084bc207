"""What each Kafka error during a checkpoint means for the batch."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from ledger_stream.processor.delivery import classify

pytestmark = pytest.mark.timeout(30)


def _error(code: int, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, "test", **flags))


@pytest.mark.parametrize("code", [KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
                                  KafkaError.REBALANCE_IN_PROGRESS])
def test_a_stale_generation_waits_for_the_rebalance(code: int) -> None:
    why = classify(_error(code, txn_requires_abort=True), "send_offsets_to_transaction")
    assert (why.kind, why.await_rebalance, why.new_producer) == ("fenced", True, False)
    assert why.reason.startswith("fenced: the group moved on (send_offsets_to_transaction: ")


@pytest.mark.parametrize("code", [KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                  KafkaError.INVALID_PRODUCER_EPOCH])
def test_a_fenced_producer_is_replaced(code: int) -> None:
    why = classify(_error(code, fatal=code == KafkaError._FENCED), "commit_transaction")
    assert (why.kind, why.new_producer, why.await_rebalance) == ("producer_fatal", True, False)


def test_any_fatal_error_replaces_the_producer() -> None:
    why = classify(_error(KafkaError._STATE, fatal=True), "produce")
    assert (why.kind, why.new_producer) == ("producer_fatal", True)


def test_an_abortable_error_only_abandons_the_batch() -> None:
    why = classify(_error(KafkaError._TIMED_OUT, txn_requires_abort=True), "commit_transaction")
    assert (why.kind, why.new_producer, why.await_rebalance) == ("aborted", False, False)
