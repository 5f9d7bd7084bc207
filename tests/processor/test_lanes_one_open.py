"""Exactly once on two lanes: at no time is a transaction open on both. A batch begins on
one lane only once the other lane's last transaction is over: committed (the commit
returned), aborted, or fenced by a new producer of that lane's id (whose init_transactions
aborts or completes it). Otherwise the two lanes' offset commits of one partition could
land out of batch order. Driven through every failure a batch meets (the runtime's
``_abandon``: abort, and a new producer when the batch says so or the abort fails),
against a model of the transaction coordinator behind the ``client`` interface."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ledger_stream.processor import delivery
from ledger_stream.processor.delivery import ExactlyOnceDelivery
from ledger_stream.processor.exceptions import BatchAbandoned

pytestmark = pytest.mark.timeout(30)

TID = "decider.one"
ERRORS = {
    "retriable": lambda: KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True),
    "abortable": lambda: KafkaError(KafkaError._STATE, "abortable",
                                    txn_requires_abort=True),
    "fatal": lambda: KafkaError(KafkaError._FENCED, "fenced", fatal=True),
}


class Coordinator:
    """Per transactional id: the current producer epoch and whether a transaction is open;
    every begin that finds another id's transaction open is a violation."""

    def __init__(self) -> None:
        self.epoch: dict[str, int] = {}
        self.open: set[str] = set()
        self.violations: list[str] = []
        self.failures: dict[str, list[str]] = {}  # call -> what its next calls do
        self.release = threading.Event()  # lets a wedged call return (fenced by then)


class ModelProducer:
    coordinator = Coordinator()

    def __init__(self, config: dict[str, Any]) -> None:
        self.id = config["transactional.id"]
        self.epoch = 0

    def _call(self, name: str) -> None:
        """Fails as planned, or as a fenced producer (a newer one of its id started)."""
        c = self.coordinator
        planned = c.failures.get(name)
        if planned:
            kind = planned.pop(0)
            if kind == "wedge":
                c.release.wait()
            else:
                raise KafkaException(ERRORS[kind]())
        if name != "init_transactions" and self.epoch != c.epoch.get(self.id):
            raise KafkaException(ERRORS["fatal"]())  # fenced by a newer producer of the id

    def init_transactions(self, timeout: float) -> None:
        c = self.coordinator
        self._call("init_transactions")
        self.epoch = c.epoch[self.id] = c.epoch.get(self.id, 0) + 1
        c.open.discard(self.id)  # the predecessor's transaction: aborted or completed

    def begin_transaction(self) -> None:
        c = self.coordinator
        self._call("begin_transaction")
        others = sorted(c.open - {self.id})
        if others:
            c.violations.append(f"{self.id} began while {others} open")
        c.open.add(self.id)

    def send_offsets_to_transaction(self, *args: object) -> None:
        self._call("send_offsets_to_transaction")

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit_transaction")
        self.coordinator.open.discard(self.id)

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort_transaction")
        self.coordinator.open.discard(self.id)

    def produce(self, *args: object, **kwargs: object) -> None:
        pass

    def flush(self, timeout: float = 0.0) -> int:
        return 0

    def poll(self, timeout: float = 0.0) -> int:
        return 0


class Lanes(ExactlyOnceDelivery):
    client = ModelProducer  # type: ignore[assignment]


def batch(d: ExactlyOnceDelivery, offset: int) -> bool:
    """One batch through the checkpoint's calls; on BatchAbandoned, what the runtime's
    ``_abandon`` does. Whether it committed."""
    try:
        d.begin()
        d.send("receipts", b"v", b"k")
        d.confirm()
        d.commit([TopicPartition("intents", 0, offset)], object())
        return True
    except BatchAbandoned as why:
        new_producer = why.new_producer
        try:
            d.abort()
        except BatchAbandoned:
            new_producer = True
        if new_producer:
            d.replace_producer()
        return False


FAILURES = {
    "commit times out every retry": {"commit_transaction": ["retriable"] * 3},
    "commit needs an abort": {"commit_transaction": ["abortable"]},
    "commit fenced": {"commit_transaction": ["fatal"]},
    "commit wedged": {"commit_transaction": ["wedge"]},
    "offsets need an abort": {"send_offsets_to_transaction": ["abortable"]},
    "offsets wedged": {"send_offsets_to_transaction": ["wedge"]},
    "commit and its abort fail": {"commit_transaction": ["abortable"],
                                  "abort_transaction": ["fatal"]},
    "abort wedged": {"commit_transaction": ["abortable"], "abort_transaction": ["wedge"]},
    "begin fenced": {"begin_transaction": ["fatal"]},
}


@pytest.mark.parametrize("failing_batch", [1, 2])  # the first lane's batch, the second's
@pytest.mark.parametrize("failure", list(FAILURES))
def test_no_batch_begins_while_the_other_lanes_transaction_is_open(
        monkeypatch: pytest.MonkeyPatch, failure: str, failing_batch: int) -> None:
    monkeypatch.setattr(delivery, "TXN_TIMEOUT_S", 0.1)  # a wedged call is given up at once
    monkeypatch.setattr(delivery, "WEDGED_GRACE_S", 0.1)
    c = ModelProducer.coordinator = Coordinator()
    d = Lanes({"transactional.id": TID}, "changelog")
    try:
        results = []
        for offset in range(6):
            if offset == failing_batch:
                c.failures = {call: list(kinds) for call, kinds in FAILURES[failure].items()}
            results.append(batch(d, offset))
            c.failures = {}
        assert c.violations == []
        assert results[failing_batch] is False
        assert results[:failing_batch] + results[failing_batch + 1:] == [True] * 5
        assert c.open == set()
    finally:
        c.release.set()
        d.close()
