"""The peers arm's ledger side alone (ledger_lab/bench/peers_ledger.py): what it counts
per topic is records and transaction markers, on the real broker."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from ledger_lab.bench.peers_ledger import end_offsets, main, topic_counts
from ledger_stream.config import Settings

pytestmark = pytest.mark.timeout(120)


def test_records_and_transaction_markers_are_counted_apart(ledger_topics: Settings) -> None:
    bootstrap, topic = str(ledger_topics.kafka_bootstrap), ledger_topics.topic("alerts")
    before = end_offsets(bootstrap, [topic])
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": f"count-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    for records in (2, 3):  # two transactions, each to one partition
        producer.begin_transaction()
        for _ in range(records):
            producer.produce(topic, value=b"x", key=b"k", partition=0)
        producer.commit_transaction(30)
    counts = topic_counts(bootstrap, [topic], before, end_offsets(bootstrap, [topic]))
    assert counts == {topic: [5, 2]}


def test_a_level_below_one_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["--agents", "0"])
