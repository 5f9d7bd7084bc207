"""A decision whose records Kafka would refuse (the key's state row or an output over the
producer's 1,000,000 bytes) is never applied: its input is dead-lettered with the sizes and
alerted, the key keeps its state, and the batch goes on. Before the check, the produce
failed, the batch was abandoned, and every retry met the same record: a stall for good."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.deadlines import due_ms
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor import step as step_module
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.exceptions import OutputTooLarge
from ledger_stream.processor.limits import ERROR_TEXT_MAX, INPUT_ROOM, RECORD_MAX, RECORD_ROOM
from ledger_stream.processor.step import LedgerStep, Out
from ledger_stream.state import MemoryPartitionStore, decode_row
from tests.factories import claim, intent, outcome
from tests.processor.fakes import ATTEMPTS, CODEC, INTENTS, PARTITIONS, OneKey, make_step, record_of

pytestmark = pytest.mark.timeout(60)

KEY = "acme/pay/big-1"
P = partition_for(KEY, PARTITIONS)
HUGE_ID = "x" * 600_000  # under the limit as an outcome; twice in the key's row (1.2 MB)


def _dispatched_batch() -> tuple[Batch, MemoryPartitionStore]:
    store = MemoryPartitionStore(P)
    batch = Batch(make_step(), {P: store}, {}, (INTENTS, ATTEMPTS))
    batch.add_all([record_of(intent(key=KEY), INTENTS, 0, 1_000),  # type: ignore[list-item]
                   record_of(claim(key=KEY), ATTEMPTS, 0, 1_100)])
    return batch, store


def test_an_outcome_whose_row_kafka_would_refuse_is_dead_lettered_and_the_key_keeps_its_state(
        ) -> None:
    batch, _ = _dispatched_batch()
    before = len(batch.outputs)
    huge = outcome(ev.OutcomeStatus.SUCCEEDED, key=KEY, external_id=HUGE_ID)
    assert len(CODEC.encode(huge)) < RECORD_MAX  # a record the connector's producer takes
    batch.add(record_of(huge, ATTEMPTS, 1, 1_200))  # type: ignore[arg-type]
    added = [CODEC.decode(o.value) for o in batch.outputs[before:]]
    assert sorted(type(o).__name__ for o in added) == ["Alert", "DeadLetter"]
    letter = next(o for o in added if isinstance(o, ev.DeadLetter))
    assert (letter.topic, letter.partition, letter.offset) == (ATTEMPTS, P, 1)
    assert letter.reason.startswith("Kafka would refuse its outputs: its key's state row "
                                    "would take 1,200,")
    assert next(o for o in added if isinstance(o, ev.Alert)).kind is ev.AlertKind.POISON_INPUT
    overlay = batch.overlays[P]
    assert overlay.state(KEY).phase is Phase.DISPATCHED  # the outcome was not applied
    assert all(len(o.value) < RECORD_MAX // 2 for o in batch.outputs)
    assert all(len(row) < RECORD_MAX for row in overlay.rows().values())
    assert decode_row(overlay.rows()[KEY]).phase is Phase.DISPATCHED
    # The key is not stuck: the connector's next report (or the reconcile) settles it.
    batch.add(record_of(outcome(ev.OutcomeStatus.SUCCEEDED, key=KEY), ATTEMPTS, 2, 1_300))  # type: ignore[arg-type]
    assert overlay.state(KEY).phase is Phase.SUCCEEDED


def test_a_refused_decision_changes_and_counts_nothing() -> None:
    step, view = make_step(), OneKey()
    for event in (intent(key=KEY), claim(key=KEY)):
        step.decide(view, event, 1_000)  # type: ignore[arg-type]
    step.tally.counts.clear()
    state = view.state(KEY)
    with pytest.raises(OutputTooLarge, match="state row would take"):
        step.decide(view, outcome(ev.OutcomeStatus.SUCCEEDED, key=KEY,  # type: ignore[arg-type]
                                  external_id=HUGE_ID), 1_200)
    assert view.state(KEY) is state
    assert not step.tally.counts


def test_an_output_kafka_would_refuse_is_named_with_its_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # An intent from a producer allowing larger records than ours, decided without read's
    # check: its row made small here, so that the dispatch's own size is what is refused.
    monkeypatch.setattr(step_module, "encode_row", lambda state: b"[]")
    big = intent(key=KEY, args={"a": "y" * 999_000})
    with pytest.raises(OutputTooLarge, match=r"its dispatch record would take 999,\d{3} bytes"):
        make_step().decide(OneKey(), big, 1_000)  # type: ignore[arg-type]


def test_a_timer_whose_row_kafka_would_refuse_is_not_applied_and_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    # A deadline has no record to dead-letter: the key keeps its state (and its timer).
    step, view = make_step(), OneKey()
    grown = KeyState(key=KEY, phase=Phase.DISPATCHED, attempt=1, granted_claim_id="c1",
                     lease_until_ms=2_000, intent_event_id="i", target="t",
                     args_json="z" * 999_000)  # a row written before the check
    view.states[KEY] = grown
    due = due_ms(grown, step.policy)
    assert due is not None
    step.tally.counts.clear()
    with caplog.at_level(logging.ERROR, logger=step_module.__name__):
        assert step.timer(view, KEY, due, due) == []  # type: ignore[arg-type]
    assert view.state(KEY) is grown
    assert not step.tally.counts  # nor counted: the timer fires again at every batch
    assert "Kafka would refuse its records" in caplog.text


def test_a_record_to_forward_that_kafka_would_refuse_is_dead_lettered() -> None:
    # A record placed under the old partition count by a producer with a larger limit than
    # the processor's: forwarded whole, its produce would fail every retry.
    key, old, after, batch = _forwarding_batch()
    value = CODEC.encode(intent(key=key, args={"a": "y" * 999_000}))
    batch.add(_message(INTENTS, old, 7, key.encode(), value))
    topics = sorted(o.topic for o in batch.outputs)
    assert topics == ["alerts", "dlq"]
    letter = CODEC.decode(next(o.value for o in batch.outputs if o.topic == "dlq"))
    assert f"a record to forward to partition {partition_for(key, after)} takes 999," \
        in letter.reason
    assert batch.offsets()  # committed past it: the batch goes on
    small = CODEC.encode(intent(key=key))
    batch.add(_message(INTENTS, old, 8, key.encode(), small))
    assert batch.outputs[-1] == Out("intents", key.encode(), small, (),
                                    partition_for(key, after))


def _forwarding_batch(before: int = 3, after: int = 6) -> tuple[str, int, int, Batch]:
    """A batch of a processor grown from ``before`` to ``after`` partitions, reading the old
    partition of a key that moves: its records are forwarded."""
    key = next(k for k in (f"acme/refund/fwd-{i}" for i in range(100))
               if partition_for(k, before) != partition_for(k, after))
    old = partition_for(key, before)
    grown = LedgerStep(make_step().policy, CODEC, {INTENTS: "intents", ATTEMPTS: "attempts"},
                       after, grown_from=before)
    return key, old, after, Batch(grown, {old: MemoryPartitionStore(old)}, {}, (INTENTS, ATTEMPTS))


def _message(topic: str, partition: int, offset: int, key: bytes, value: bytes,
             headers: list[tuple[str, bytes]] | None = None) -> Any:
    from ledger_lab.harness.records import FakeMessage

    return FakeMessage(topic, partition, offset, 1_000, key, value, headers)


def test_a_record_to_forward_counts_its_key_and_headers() -> None:
    # Its value alone fits; with its key and headers the record is past what fits.
    key, old, after, batch = _forwarding_batch()
    probe = len(CODEC.encode(intent(key=key, args={"a": ""})))
    value = CODEC.encode(intent(key=key, args={"a": "y" * (RECORD_ROOM - 100 - probe)}))
    assert RECORD_ROOM - 110 < len(value) <= RECORD_ROOM - 90
    batch.add(_message(INTENTS, old, 7, key.encode(), value, [("trace", b"t" * 200)]))
    assert sorted(o.topic for o in batch.outputs) == ["alerts", "dlq"]


@pytest.mark.parametrize("extra", [0, 1])
def test_the_room_for_a_row_leaves_its_key_in_bytes_not_characters(
        monkeypatch: pytest.MonkeyPatch, extra: int) -> None:
    # A key of two-byte characters: the changelog record carries it as UTF-8 beside its
    # row, so a row of exactly what is left fits and one byte more does not.
    key = "acme/pay/" + "\u00e9" * 200
    room = INPUT_ROOM - len(key.encode("utf-8"))
    monkeypatch.setattr(step_module, "encode_row", lambda state: b"r" * (room + extra))
    view = OneKey()
    if extra:
        with pytest.raises(OutputTooLarge, match="state row would take"):
            make_step().decide(view, intent(key=key), 1_000)  # type: ignore[arg-type]
        assert key not in view.states
    else:
        make_step().decide(view, intent(key=key), 1_000)  # type: ignore[arg-type]
        assert key in view.states


@pytest.mark.parametrize("length", [10, ERROR_TEXT_MAX])
def test_an_error_text_that_fits_is_kept_whole(length: int) -> None:
    # The cut is for huge texts only: any other outcome's records stay byte-identical.
    batch, _ = _dispatched_batch()
    text = "e" * length
    failed = ev.AttemptOutcome("o-1", KEY, 1, "c1", ev.OutcomeStatus.FAILED, 1_200, "", text)
    batch.add(record_of(failed, ATTEMPTS, 1, 1_200))  # type: ignore[arg-type]
    state = batch.overlays[P].state(KEY)
    assert state.phase is not Phase.DISPATCHED
    assert "[cut" not in state.status_detail
    assert text in state.status_detail


@pytest.mark.parametrize("status", [ev.OutcomeStatus.FAILED, ev.OutcomeStatus.UNKNOWN])
def test_a_huge_error_text_is_cut_and_the_outcome_it_reports_is_decided(
        status: ev.OutcomeStatus) -> None:
    # The effect's fate is what matters; the text is a diagnostic (a target's error page).
    batch, _ = _dispatched_batch()
    before = len(batch.outputs)
    failed = ev.AttemptOutcome("o-1", KEY, 1, "c1", status, 1_200, "", "e" * 990_000)
    batch.add(record_of(failed, ATTEMPTS, 1, 1_200))  # type: ignore[arg-type]
    added = [CODEC.decode(o.value) for o in batch.outputs[before:]]
    assert not any(isinstance(o, ev.DeadLetter) for o in added)
    state = batch.overlays[P].state(KEY)
    assert state.phase is not Phase.DISPATCHED  # decided
    assert state.status_detail.endswith("... [cut: 990,000 characters]")
    assert len(state.status_detail) < ERROR_TEXT_MAX + 100


def test_the_largest_intent_taken_leaves_room_for_its_deadlines() -> None:
    # A lease that runs out, a reconcile that times out: the processor decides them with no
    # record to dead-letter, each adding to the key's row. The largest intent an input may
    # bring still lets them through, to the operator queue (never a key stuck DISPATCHED,
    # its refused deadline logged at every batch).
    def taken(size: int) -> OneKey | None:
        step, view = make_step(), OneKey()
        try:
            step.decide(view, intent(key=KEY, args={"a": "y" * size}), 1_000)  # type: ignore[arg-type]
            step.decide(view, claim(key=KEY), 1_100)  # type: ignore[arg-type]
        except OutputTooLarge:
            return None
        return view

    low, high = 900_000, RECORD_MAX
    while low < high:  # the largest argument that is taken
        middle = (low + high + 1) // 2
        low, high = (middle, high) if taken(middle) else (low, middle - 1)
    step, view = make_step(), taken(low)
    assert view is not None
    for _ in range(4):
        due = due_ms(view.state(KEY), step.policy)
        if due is None:
            break
        before = view.state(KEY)
        step.timer(view, KEY, due, due)  # type: ignore[arg-type]
        assert view.state(KEY) is not before, "a deadline refused"
    assert view.state(KEY).phase is Phase.NEEDS_OPERATOR
