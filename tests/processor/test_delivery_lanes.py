"""Exactly once on two lanes, behind the ``client`` interface (no broker): consecutive
batches take the two transactional ids in turn, and a failed lane is replaced with a
producer of its own id while the other lane goes on."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ledger_stream.kafka.reach import StopRequested
from ledger_stream.processor.delivery import ExactlyOnceDelivery
from ledger_stream.processor.exceptions import BatchAbandoned

pytestmark = pytest.mark.timeout(30)

TID = "decider.one"


class LaneProducer:
    """A transactional producer that records its id and calls; ``fail`` names a call that
    raises a fatal error (a fenced producer) once."""

    made: list[LaneProducer] = []
    log: list[tuple[str, str]] = []  # (transactional id, call), every producer's, in order

    def __init__(self, config: dict[str, Any]) -> None:
        self.id = config["transactional.id"]
        self.calls: list[str] = []
        self.fail = ""
        LaneProducer.made.append(self)

    def __getattr__(self, name: str) -> Any:
        def call(*args: object, **kwargs: object) -> int:
            self.calls.append(name)
            LaneProducer.log.append((self.id, name))
            if name == self.fail:
                self.fail = ""
                raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
            return 0
        return call


class Lanes(ExactlyOnceDelivery):
    client = LaneProducer  # type: ignore[assignment]


def batch(d: ExactlyOnceDelivery, offset: int) -> None:
    d.begin()
    d.send("receipts", b"v", b"k")
    d.confirm()
    d.commit([TopicPartition("intents", 0, offset)], object())


def committed_by() -> list[str]:
    return [tid for tid, call in LaneProducer.log if call == "commit_transaction"]


def test_consecutive_batches_take_the_two_transactional_ids_in_turn() -> None:
    LaneProducer.made, LaneProducer.log = [], []
    d = Lanes({"transactional.id": TID, "acks": "all"}, "changelog")
    # Both lanes are initialised at start-up: a restart fences either lane's transaction.
    assert [(p.id, p.calls) for p in LaneProducer.made] == [
        (TID, ["init_transactions"]), (f"{TID}.b", ["init_transactions"])]
    order = []
    for offset in range(4):
        batch(d, offset)
        order.append(d.transactional_id)
    assert order == [TID, f"{TID}.b", TID, f"{TID}.b"]
    assert committed_by() == [TID, f"{TID}.b", TID, f"{TID}.b"]  # one transaction a batch
    d.close()


def test_a_failed_lane_is_replaced_with_its_own_id_and_the_other_goes_on() -> None:
    LaneProducer.made, LaneProducer.log = [], []
    d = Lanes({"transactional.id": TID}, "changelog")
    first, second = LaneProducer.made
    batch(d, 1)  # the first lane
    second.fail = "commit_transaction"
    with pytest.raises(BatchAbandoned) as why:
        batch(d, 2)  # the second lane's producer is fenced
    assert why.value.new_producer
    d.abort()
    d.replace_producer()  # what the runtime does with new_producer
    assert len(LaneProducer.made) == 3
    replacement = LaneProducer.made[2]
    assert (replacement.id, replacement.calls) == (f"{TID}.b", ["init_transactions"])
    assert first.calls.count("init_transactions") == 1  # the other lane untouched
    batch(d, 3)
    batch(d, 4)
    # Batch 2's commit failed on the second lane; 3 on the first lane, 4 on the replacement.
    assert committed_by() == [TID, f"{TID}.b", TID, f"{TID}.b"]
    assert second.calls.count("commit_transaction") == 1  # the failed one: never used again
    assert replacement.calls.count("commit_transaction") == 1
    d.close()
    assert {p.id for p in LaneProducer.made if "flush" in p.calls} == {TID, f"{TID}.b"}


class StartProducer:
    """A transactional producer whose ``init_transactions`` fails for one id (fatal), or
    sets the start-up's stop event and fails retriably (a SIGTERM during the set-up).
    Only weak references are kept, so a test sees whether anything still holds one."""

    refs: list[weakref.ref[StartProducer]] = []
    failing = ""
    how = "fatal"
    stop: threading.Event | None = None

    def __init__(self, config: dict[str, Any]) -> None:
        self.id = config["transactional.id"]
        StartProducer.refs.append(weakref.ref(self))

    def init_transactions(self, timeout: float) -> None:
        if self.id != StartProducer.failing:
            return
        if StartProducer.how == "stop":
            assert StartProducer.stop is not None
            StartProducer.stop.set()
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out",
                                            retriable=True))
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    def flush(self, timeout: float = 0.0) -> int:
        return 0


class Starting(ExactlyOnceDelivery):
    client = StartProducer  # type: ignore[assignment]


def alive() -> list[str]:
    gc.collect()
    return [p.id for p in (ref() for ref in StartProducer.refs) if p is not None]


@pytest.mark.parametrize(("how", "error"), [("fatal", BatchAbandoned),
                                            ("stop", StopRequested)])
def test_a_second_lane_that_cannot_start_leaves_the_first_lanes_producer_closed(
        how: str, error: type[Exception]) -> None:
    """The second lane's init_transactions fails (or a SIGTERM stops it): the first lane's
    producer, initialised already, is closed before the error goes up, not kept alive by
    the error's traceback (which holds the half-built delivery; the frames of the failed
    call hold the failing producer itself)."""
    StartProducer.refs, StartProducer.failing, StartProducer.how = [], f"{TID}.b", how
    StartProducer.stop = threading.Event()
    with pytest.raises(error) as raised:
        Starting({"transactional.id": TID}, "changelog", StartProducer.stop)
    assert raised.value.__traceback__ is not None  # what holds the half-built delivery
    assert TID not in alive()


def test_close_lets_both_lanes_go() -> None:
    StartProducer.refs, StartProducer.failing = [], ""
    d = Starting({"transactional.id": TID}, "changelog")
    assert alive() == [TID, f"{TID}.b"]
    d.close()
    assert alive() == []
    d.close()  # closing again does nothing
