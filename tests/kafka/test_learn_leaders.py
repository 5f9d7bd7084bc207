"""``learn_leaders``: a new client learns a topic's partition leaders before its first fetch
(the processor asks for the changelog's before its first restore), and gives up on a topic
that does not exist within its timeout."""

from __future__ import annotations

import threading
import time

import pytest

from ledger_stream.config import Settings
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.offsets import learn_leaders
from ledger_stream.processor import clients

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(60)]


def test_a_new_client_learns_the_changelog_leaders_and_gives_up_on_a_missing_topic(
        ledger_topics: Settings) -> None:
    assert ledger_topics.kafka_bootstrap is not None
    client = Consumer(clients.changelog_ends_config(ledger_topics.kafka_bootstrap))
    try:
        topic = ledger_topics.topic("changelog")
        assert learn_leaders(client, topic)
        found = client.list_topics(topic, timeout=5).topics[topic]
        assert len(found.partitions) == ledger_topics.partitions
        assert all(p.leader >= 0 for p in found.partitions.values())
        began = time.monotonic()
        assert not learn_leaders(client, f"{topic}-missing", timeout_s=0.5)
        assert time.monotonic() - began < 4.0
    finally:
        client.close()


def test_a_set_stop_event_ends_the_wait_at_once(ledger_topics: Settings) -> None:
    """The receipts thread of a client that is closing does not wait out the timeout: a
    stop set while it waits ends the wait."""
    assert ledger_topics.kafka_bootstrap is not None
    client = Consumer(clients.changelog_ends_config(ledger_topics.kafka_bootstrap))
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    try:
        began = time.monotonic()
        assert not learn_leaders(client, f"{ledger_topics.topic('changelog')}-missing",
                                 timeout_s=30, stop=stop)
        assert time.monotonic() - began < 4.0  # the list_topics under way (at most 2 s)
    finally:
        client.close()
