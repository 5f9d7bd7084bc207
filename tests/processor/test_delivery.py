"""What each Kafka error during a checkpoint means for the batch."""

from __future__ import annotations

import threading
import time
import weakref

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ledger_stream.processor.at_least_once import AtLeastOnceDelivery
from ledger_stream.processor.exceptions import BatchAbandoned
from ledger_stream.processor.kafka_calls import classify

pytestmark = pytest.mark.timeout(30)


def _error(code: int, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, "test", **flags))


@pytest.mark.parametrize("code", [KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
                                  KafkaError.REBALANCE_IN_PROGRESS,
                                  KafkaError.FENCED_MEMBER_EPOCH])
def test_a_stale_generation_waits_for_the_rebalance(code: int) -> None:
    why = classify(_error(code, txn_requires_abort=True), "send_offsets_to_transaction")
    assert (why.kind, why.await_rebalance, why.new_producer) == ("fenced", True, False)
    assert why.reason.startswith("fenced: the group moved on (send_offsets_to_transaction: ")


def test_a_stale_member_epoch_only_abandons_the_batch() -> None:
    why = classify(_error(KafkaError.STALE_MEMBER_EPOCH), "commit")
    assert (why.kind, why.await_rebalance, why.new_producer) == ("fenced", False, False)


class EpochMovingConsumer:
    """Answers its first ``stale`` commits with STALE_MEMBER_EPOCH, then commits."""

    def __init__(self, stale: int) -> None:
        self.stale, self.commits = stale, 0

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> None:
        self.commits += 1
        if self.commits <= self.stale:
            raise _error(KafkaError.STALE_MEMBER_EPOCH)


def test_at_least_once_commits_again_once_when_the_member_epoch_moved() -> None:
    offsets = [TopicPartition("ledger.intents", 0, 5)]
    delivery = AtLeastOnceDelivery.__new__(AtLeastOnceDelivery)  # no producer needed
    delivery._consumer = EpochMovingConsumer(stale=1)  # type: ignore[assignment]
    delivery.commit(offsets, None)
    assert delivery._consumer.commits == 2  # type: ignore[attr-defined]
    delivery._consumer = EpochMovingConsumer(stale=2)  # type: ignore[assignment]
    with pytest.raises(BatchAbandoned) as why:
        delivery.commit(offsets, None)
    assert delivery._consumer.commits == 2  # type: ignore[attr-defined]
    assert not why.value.await_rebalance


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


class StuckProducer:
    """A transactional producer whose calls never return, as librdkafka's
    ``send_offsets_to_transaction`` does when the group coordinator went away
    (confluentinc/librdkafka#5456, #5511; found by the chaos soak)."""

    def __init__(self, stuck: set[str]) -> None:
        self.stuck, self.calls, self.release = stuck, [], threading.Event()
        self.flushed = 0

    def __getattr__(self, name: str):
        def call(*args: object) -> None:
            self.calls.append(name)
            if name in self.stuck:
                self.release.wait()
        return call

    def flush(self, timeout: float) -> int:
        self.flushed += 1
        return 0


def test_a_producer_stuck_past_its_timeout_is_replaced_and_never_touched_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger_stream.processor import delivery

    # The first lane's producer wedges; the second lane's and the replacement are healthy.
    made = [StuckProducer({"send_offsets_to_transaction"}), StuckProducer(set()),
            StuckProducer(set())]
    monkeypatch.setattr(delivery, "TXN_TIMEOUT_S", 0.2)
    monkeypatch.setattr(delivery, "WEDGED_GRACE_S", 0.1)
    monkeypatch.setattr(delivery.Delivery, "_new_producer", lambda self: made.pop(0))
    d = delivery.ExactlyOnceDelivery({}, "changelog")
    stuck = d._producer
    d.begin()
    started = time.monotonic()
    with pytest.raises(BatchAbandoned) as why:
        d.commit([TopicPartition("intents", 0, 5)], object())
    assert time.monotonic() - started < 2
    assert (why.value.kind, why.value.new_producer) == ("producer_wedged", True)
    # Abandoning the batch: the wedged producer is not asked to abort (that would wait
    # behind the stuck call); a new one, same transactional id, fences it.
    with pytest.raises(BatchAbandoned) as again:
        d.abort()
    assert again.value.new_producer
    d.replace_producer()
    assert stuck.calls == ["init_transactions", "begin_transaction",
                           "send_offsets_to_transaction"]
    assert stuck.flushed == 0
    assert d._producer.calls == ["init_transactions"]
    replacement = d._producer
    for _ in range(2):  # the next batch takes the second lane, the one after the first
        d.begin()
        d.commit([TopicPartition("intents", 0, 5)], object())
        assert d._producer.calls[-2:] == ["send_offsets_to_transaction", "commit_transaction"]
    assert d._producer is replacement and stuck not in d._lanes
    stuck.release.set()



def test_producers_wedged_through_an_outage_are_freed_once_their_calls_return(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker outage wedges one producer per replacement (each new one's
    init_transactions waits too). Each kept its thread and stayed referenced for ever: a
    long outage grew the process by a producer and its librdkafka threads every 35 s. Now
    each is freed once its call returns, at the next batch: no garbage collection needed
    (the stuck call raises when it returns, fenced by its successor, and its exception once
    held the producer in a reference cycle)."""
    from ledger_stream.processor import delivery

    made = [FencedWhenReleased({"commit_transaction"}), StuckProducer(set()),  # 2 lanes
            FencedWhenReleased({"init_transactions"}),
            FencedWhenReleased({"init_transactions"}), StuckProducer(set())]
    wedged = [weakref.ref(p) for p in (made[0], made[2], made[3])]
    monkeypatch.setattr(delivery, "TXN_TIMEOUT_S", 0.1)
    monkeypatch.setattr(delivery, "WEDGED_GRACE_S", 0.05)
    monkeypatch.setattr(delivery, "Producer", lambda config: made.pop(0))
    d = delivery.ExactlyOnceDelivery({}, "changelog")
    d.begin()
    with pytest.raises(BatchAbandoned):
        d.commit([TopicPartition("intents", 0, 5)], object())
    with pytest.raises(BatchAbandoned):
        d.abort()  # wedged: not asked to abort
    for _ in range(2):  # the outage goes on: each new producer wedges in init_transactions
        with pytest.raises(BatchAbandoned) as why:
            d.replace_producer()
        assert why.value.kind == "producer_wedged"
    del why  # its traceback holds the last stuck call's frames
    d.replace_producer()  # the broker is back: a healthy producer
    callers = [caller for _, caller in d._stuck]
    assert len(d.wedged) == 3 and len(callers) == 3
    for ref in wedged:  # and the stuck calls return (fenced)
        producer = ref()
        assert producer is not None
        producer.release.set()
    del producer
    for caller in callers:
        assert caller.ended.wait(5)  # each stuck thread ends after its call
    del callers
    d.begin()  # the next batch lets them go
    assert [ref() for ref in wedged] == [None, None, None]
    d.commit([TopicPartition("intents", 0, 5)], object())
    d.close()


class FencedWhenReleased(StuckProducer):
    """Stuck until released, then fenced by its successor."""

    def __getattr__(self, name: str):
        stuck = super().__getattr__(name)

        def call(*args: object) -> None:
            stuck(*args)
            if name in self.stuck:
                raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
        return call


class ThreadRecordingProducer:
    """Records the thread each transactional call ran on."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def __getattr__(self, name: str):
        def call(*args: object) -> None:
            self.threads.append(threading.get_ident())
        return call


def test_bounded_calls_share_one_thread_until_one_is_stuck(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger_stream.processor import delivery

    monkeypatch.setattr(delivery, "TXN_TIMEOUT_S", 0.2)
    monkeypatch.setattr(delivery, "WEDGED_GRACE_S", 0.1)
    monkeypatch.setattr(delivery.Delivery, "_new_producer",
                        lambda self: ThreadRecordingProducer())
    d = delivery.ExactlyOnceDelivery({}, "changelog")
    for _ in range(3):
        d.commit([TopicPartition("intents", 0, 5)], object())
    threads = d._producer.threads  # type: ignore[attr-defined]
    assert len(threads) == 7 and len(set(threads)) == 1  # init + 3 x (offsets, commit)
    assert threading.get_ident() not in threads
    release = threading.Event()
    with pytest.raises(BatchAbandoned):
        d._bounded("stuck", release.wait, 0.2)
    d.commit([TopicPartition("intents", 0, 6)], object())  # a new thread: the old is stuck
    assert len(set(d._producer.threads)) == 2  # type: ignore[attr-defined]
    release.set()
    d.close()


class FullQueueProducer:
    """Its local queue is full; while deliveries drain, it turns out to be fenced."""

    def produce(self, *args: object, **kwargs: object) -> None:
        raise BufferError("Local: Queue full")

    def poll(self, timeout: float) -> int:
        raise _error(KafkaError._FENCED, fatal=True)


def test_a_producer_fenced_while_its_queue_drains_abandons_the_batch() -> None:
    """The drain's poll once ran inside the BufferError handler, whose sibling handler did
    not catch its KafkaException: a traceback instead of a new producer."""
    delivery = AtLeastOnceDelivery.__new__(AtLeastOnceDelivery)
    delivery._producer = FullQueueProducer()  # type: ignore[assignment]
    with pytest.raises(BatchAbandoned) as why:
        delivery.send("ledger.receipts", b"v", b"k")
    assert (why.value.kind, why.value.new_producer) == ("producer_fatal", True)


class QueueFullOnce:
    """Takes every record but the second, whose first hand-over finds the queue full."""

    def __init__(self) -> None:
        self.produced: list[tuple[object, ...]] = []
        self.full = [False, True]
        self.polls = 0

    def produce(self, topic: str, **record: object) -> None:
        if len(self.full) > len(self.produced) and self.full[len(self.produced)]:
            self.full[len(self.produced)] = False
            raise BufferError("Local: Queue full")
        self.produced.append((topic, *sorted(record.items())))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


def test_send_all_hands_every_record_over_in_order_and_waits_out_a_full_queue() -> None:
    """The checkpoint hands a batch's records over in one call: the producer's own call
    per record (a partition and headers only where given), the full-queue wait of ``send``
    when the queue is full, and nothing lost or repeated."""
    delivery = AtLeastOnceDelivery.__new__(AtLeastOnceDelivery)
    producer = delivery._producer = QueueFullOnce()  # type: ignore[assignment]
    delivery.send_all([("a", b"1", b"k1", None, None),
                       ("b", b"2", b"k2", 3, None),
                       ("c", b"3", b"k3", None, [("h", b"x")]),
                       ("d", b"4", None, 5, [("h", b"y")])])
    assert producer.produced == [
        ("a", ("key", b"k1"), ("value", b"1")),
        ("b", ("key", b"k2"), ("partition", 3), ("value", b"2")),
        ("c", ("headers", [("h", b"x")]), ("key", b"k3"), ("value", b"3")),
        ("d", ("headers", [("h", b"y")]), ("key", None), ("partition", 5), ("value", b"4"))]
    assert producer.polls == 1  # the full queue drained once, then the record went


def test_send_all_turns_a_kafka_error_into_an_abandoned_batch() -> None:
    class Fenced:
        def produce(self, *args: object, **kwargs: object) -> None:
            raise _error(KafkaError._FENCED, fatal=True)

    delivery = AtLeastOnceDelivery.__new__(AtLeastOnceDelivery)
    delivery._producer = Fenced()  # type: ignore[assignment]
    with pytest.raises(BatchAbandoned) as why:
        delivery.send_all([("a", b"1", b"k1", None, None)])
    assert (why.value.kind, why.value.new_producer) == ("producer_fatal", True)
