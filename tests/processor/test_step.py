"""Reading one record: every kind of hostile input is poison (data, not an exception),
and a registry outage is not."""

from __future__ import annotations

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.state import Phase
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor import metrics
from ledger_stream.processor.step import LedgerStep, _child
from ledger_stream.serde.exceptions import SchemaRegistryUnavailable
from tests.factories import claim, intent, now_of, outcome, reconciled, resolution
from tests.processor.fakes import ATTEMPTS, CODEC, INTENTS, PARTITIONS, OneKey, make_step

pytestmark = pytest.mark.timeout(30)

KEY = "acme/refund/r-1"
HOME = partition_for(KEY, PARTITIONS)
OTHER = (HOME + 1) % PARTITIONS


def _read(value: bytes | None, key: bytes | None = KEY.encode(), topic: str = INTENTS,
          partition: int = HOME) -> ev.InputEvent | ev.Tick:
    return make_step().read(value, key, topic, partition, 7, 5_000)


def _reason(result: object) -> str:
    assert isinstance(result, ev.PoisonInput), result
    assert (result.offset, result.at_ms) == (7, 5_000)
    return result.reason


def test_a_valid_intent_is_read_as_itself() -> None:
    event = intent(key=KEY)
    assert _read(CODEC.encode(event)) == event
    observed = intent(key=KEY, observations=(ev.Observation("model", "ab" * 32, 9, "m"),))
    assert _read(CODEC.encode(observed)) == observed


@pytest.mark.parametrize(("case", "expected"), [
    ("null key", "null message key"),
    ("wrong partition", f"record in partition {OTHER}, its key belongs to {HOME}"),
    ("tombstone", "empty message value (tombstone)"),
    ("garbage", "undecodable: "),
    ("attempt on intents", "undecodable: got AttemptClaim, expected Intent"),
    ("tick on intents", "undecodable: got Tick, expected Intent"),
    ("invalid", "invalid Intent: args_hash is not the SHA-256 of args_json"),
    ("key mismatch", "invalid Intent: message key differs from the event's operation key"),
    ("not utf-8", "message key is not UTF-8"),
    ("bad observation", "invalid Intent: an observation's digest is not a hex SHA-256"),
])
def test_hostile_records_are_poison_with_a_reason(case: str, expected: str) -> None:
    good = CODEC.encode(intent(key=KEY))
    key: bytes | None = KEY.encode()
    value: bytes | None = good
    partition, topic = HOME, INTENTS
    if case == "null key":
        key = None
    elif case == "wrong partition":
        partition = OTHER
    elif case == "tombstone":
        value = None
    elif case == "garbage":
        value = b"\x00garbage"
    elif case == "attempt on intents":
        value = CODEC.encode(claim(key=KEY))
    elif case == "tick on intents":
        value = CODEC.encode(ev.Tick(HOME, "p", 1))
    elif case == "invalid":
        value = CODEC.encode(intent(key=KEY, args_hash="0" * 64))
    elif case == "key mismatch":
        key = b"acme/refund/another"
        partition = partition_for(key, PARTITIONS)
    elif case == "not utf-8":
        key = b"\xff\xfe"
    elif case == "bad observation":
        value = CODEC.encode(intent(key=KEY, observations=(
            ev.Observation("model", "a model's whole answer", 22),)))
    assert _reason(_read(value, key, topic, partition)).startswith(expected)


def test_a_tick_is_read_only_from_the_partition_it_names() -> None:
    # Ticks are keyed "~tick" and written to an explicit partition: the key's partition does
    # not apply to them, their partition field does.
    step = make_step()
    for partition in range(PARTITIONS):
        tick = ev.Tick(partition, "proc-a", 123)
        assert step.read(CODEC.encode(tick), b"~tick", ATTEMPTS, partition, 1, 9) == tick
        wrong = ev.Tick((partition + 1) % PARTITIONS, "proc-a", 123)
        assert _reason(step.read(CODEC.encode(wrong), b"~tick", ATTEMPTS, partition, 7,
                                 5_000)) == f"Tick for partition {wrong.partition} read " \
                                            f"from {partition}"


def test_poison_is_decided_without_touching_state() -> None:
    step = make_step()

    class NoState:
        def state(self, key: str) -> object:
            raise AssertionError("poison must not read state")

        def put(self, *args: object) -> None:
            raise AssertionError("poison must not write state")

    poison = step.read(b"junk", KEY.encode(), INTENTS, OTHER, 3, 42)
    assert isinstance(poison, ev.PoisonInput)
    outs = step.decide(NoState(), poison, 42)  # type: ignore[arg-type]
    assert sorted(o.topic for o in outs) == ["alerts", "dlq"]
    assert {o.key for o in outs} == {KEY.encode()}  # keyed by the record's own key
    letter = CODEC.decode(next(o.value for o in outs if o.topic == "dlq"))
    assert (letter.topic, letter.partition, letter.offset) == (INTENTS, OTHER, 3)


def test_a_registry_outage_is_not_poison() -> None:
    class DownCodec:
        def decode(self, *args: object) -> object:
            raise SchemaRegistryUnavailable("connection refused")

    step = LedgerStep(make_step().policy, DownCodec(),  # type: ignore[arg-type]
                      {INTENTS: "intents"}, PARTITIONS)
    with pytest.raises(SchemaRegistryUnavailable):
        step.read(b"\x00\x00\x00\x00\x01", KEY.encode(), INTENTS, HOME, 1, 1)


def test_each_output_is_built_once_with_the_inputs_trace_context() -> None:
    trace = (("traceparent", b"00-" + b"a" * 32 + b"-" + b"b" * 16 + b"-01"),)
    step = make_step()
    outs = step.decide(OneKey(), intent(key=KEY), 5_000, 0, trace)  # type: ignore[arg-type]
    assert {o.topic for o in outs} == {"dispatch", "receipts"}
    assert all(o.headers == trace and o.key == KEY.encode() and o.partition is None
               for o in outs)
    assert [type(CODEC.decode(o.value)).__name__ for o in outs] == ["Receipt", "Dispatch"]
    untraced = make_step().decide(OneKey(), intent(key=KEY), 5_000)  # type: ignore[arg-type]
    assert [o.headers for o in untraced] == [(), ()]
    with pytest.raises(AttributeError):
        outs[0].headers = ()  # type: ignore[misc]


def _decide_all(step: LedgerStep, view: OneKey, events: list[ev.InputEvent]
                ) -> list[dict[object, float]]:
    """Each event decided at its own stamp; the tally's counts after each (then cleared)."""
    counts = []
    for event in events:
        step.decide(view, event, now_of(event))  # type: ignore[arg-type]
        counts.append(dict(step.tally.counts))
        step.tally.counts.clear()
    return counts


def test_the_operator_queue_counts_a_key_in_as_it_enters_and_out_as_it_leaves() -> None:
    step, view = make_step(), OneKey()
    counts = _decide_all(step, view, [
        intent(key=KEY), claim(key=KEY), outcome(ev.OutcomeStatus.UNKNOWN, key=KEY),
        reconciled(ev.ReconcileStatus.UNQUERYABLE, key=KEY),
        resolution(ev.Resolution.APPLIED, key=KEY, external_id="ext-9")])
    assert view.state(KEY).phase is Phase.SUCCEEDED  # type: ignore[attr-defined]
    moves = [c.get(metrics.OPERATOR_QUEUE, 0) for c in counts]
    assert moves == [0, 0, 0, 1, -1]


def test_only_an_intents_own_answer_counts_as_a_suppressed_duplicate() -> None:
    # An attempt's outcome writes a receipt for the intent holding the key: that receipt
    # answers no input of this decision, so it is no duplicate answered.
    step, view = make_step(), OneKey()
    counts = _decide_all(step, view, [
        intent(key=KEY), claim(key=KEY), outcome(ev.OutcomeStatus.SUCCEEDED, key=KEY)])
    assert all(metrics.DUPLICATES_SUPPRESSED not in c for c in counts)
    assert counts[2].get(_child(metrics.DECISIONS, "AttemptOutcome", "applied")) == 1
    again = _decide_all(step, view, [intent(key=KEY)])[0]
    assert again.get(metrics.DUPLICATES_SUPPRESSED) == 1


PRODUCER_MAX = 1_000_000  # librdkafka's message.max.bytes: a larger record fails its produce


@pytest.mark.parametrize(("key", "value"), [
    (KEY.encode(), b"\xff" * 999_990),  # undecodable, as large as a client may write
    (b"\xff" * 600_000, b"junk"),  # a key that is not UTF-8, decoded with replacements
])
def test_a_huge_poison_record_makes_dead_letters_kafka_takes(key: bytes, value: bytes
                                                             ) -> None:
    # Whole, its dead letter was over the producer's limit: the produce failed, the batch
    # was abandoned, and each retry met the same record (the processor stalled for good).
    step = make_step()
    poison = step.read(value, key, INTENTS, HOME, 3, 42)
    assert isinstance(poison, ev.PoisonInput)
    outs = step.decide(OneKey(), poison, 42)  # type: ignore[arg-type]
    assert sorted(o.topic for o in outs) == ["alerts", "dlq"]
    assert all(len(o.key or b"") + len(o.value) < PRODUCER_MAX // 2 for o in outs)
    letter = CODEC.decode(next(o.value for o in outs if o.topic == "dlq"))
    assert (letter.topic, letter.partition, letter.offset) == (INTENTS, HOME, 3)
    assert value.startswith(letter.value) and key.startswith(letter.key)
    assert "carries the first" in letter.reason


def test_an_intent_whose_state_row_kafka_would_refuse_is_poison_not_a_stall() -> None:
    # 600 KB of quotes: a 600 KB intent, whose row writes each quote's escape escaped again
    # (1.2 MB). Decided, its changelog row's produce failed, the batch was abandoned, and
    # every retry met the same intent: one agent's call stalled the processor for good.
    quoted = intent(key=KEY, args={"a": '"' * 300_000})
    assert len(CODEC.encode(quoted)) < PRODUCER_MAX
    reason = _reason(_read(CODEC.encode(quoted)))
    assert reason.startswith("invalid Intent: its args and payload take")
    plain = intent(key=KEY, args={"a": "x" * 800_000})  # as large, nothing escaped: decided
    assert isinstance(_read(CODEC.encode(plain)), ev.Intent)
