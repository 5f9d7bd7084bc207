"""The receipts view against the real broker: each key's latest receipt, answered only once
the view has caught up to the offset the caller names (transaction markers included), kept
across a restart, and the SDK's ``status`` through it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from ledger_lab.harness.view import ServedView
from ledger_stream import LedgerClient, operation_key
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.sdk import StaleStatusError, ViewUnavailableError
from ledger_stream.sdk.view_client import ViewClient
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(90)


def receipt(key: str, intent_id: str, status: ev.ReceiptStatus) -> ev.Receipt:
    return ev.Receipt(receipt_id=uuid.uuid4().hex, key=key, intent_event_id=intent_id,
                      status=status, reason=ev.Reason.NONE, args_hash="h", attempts=1,
                      at_ms=1, key_status=status)


def Served(settings: Settings, folder: Path) -> ServedView:  # noqa: N802 (as a class)
    """The receipts view alone (its timeline is tested in tests/history)."""
    return ServedView(settings, folder, timeline=False)


@pytest.fixture
def served(ledger_topics: Settings, tmp_path: Path) -> Iterator[ServedView]:
    s = Served(ledger_topics, tmp_path / "view")
    yield s
    s.close()


def end_of(settings: Settings, key: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    from ledger_stream.kafka.offsets import end_offset

    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "x"})
    try:
        return end_offset(consumer, TopicPartition(settings.topic("receipts"),
                                                   partition_for(key, settings.partitions)))
    finally:
        consumer.close()


def test_the_latest_receipt_once_caught_up_to_the_callers_offset(ledger_topics: Settings,
                                                                  served: ServedView) -> None:
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    other = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    first = receipt(key, "i1", ev.ReceiptStatus.ACCEPTED)
    last = receipt(key, "i1", ev.ReceiptStatus.SUCCEEDED)
    for r in (first, receipt(other, "i2", ev.ReceiptStatus.REJECTED), last):
        producer.send("receipts", r)
    producer.flush()
    client = ViewClient(served.url)

    assert client.status(key, end_of(ledger_topics, key), 10) == last
    assert client.status(operation_key("acme", "refund", "never"), 0, 1) is None


def test_transaction_markers_do_not_leave_a_waiter_short(ledger_topics: Settings,
                                                         served: ServedView) -> None:
    """A committed transaction ends with a marker at the partition's end offset, never
    delivered: the view's position must pass it, or a status asked after it waits forever."""
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    producer = Producer({"bootstrap.servers": ledger_topics.kafka_bootstrap,
                         "transactional.id": f"view-test-{uuid.uuid4().hex}"})
    producer.init_transactions(20)
    delivered: list[int] = []
    producer.begin_transaction()
    done = receipt(key, "i1", ev.ReceiptStatus.SUCCEEDED)
    producer.produce(ledger_topics.topic("receipts"), AvroCodec().encode(done),
                     key.encode(), partition=partition_for(key, ledger_topics.partitions),
                     on_delivery=lambda err, msg: delivered.append(msg.offset()))
    producer.commit_transaction(20)
    # The coordinator writes the marker after it answers the commit; the end offset a
    # read-committed client sees (the last stable offset) passes the marker soon after.
    deadline = time.monotonic() + 10
    while (end := end_of(ledger_topics, key)) < delivered[0] + 2:
        assert time.monotonic() < deadline, end
        time.sleep(0.05)

    assert ViewClient(served.url).status(key, end, 10) == done
    assert served.view.position(partition_for(key, ledger_topics.partitions)) == end


def test_a_view_that_has_not_caught_up_says_so(ledger_topics: Settings,
                                               served: ServedView) -> None:
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    with pytest.raises(StaleStatusError) as caught:
        ViewClient(served.url).status(key, end_of(ledger_topics, key) + 1_000, 0.2)
    assert caught.value.wanted > caught.value.position


def test_a_restarted_view_resumes_from_its_stored_positions(ledger_topics: Settings,
                                                            tmp_path: Path) -> None:
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    done = receipt(key, "i1", ev.ReceiptStatus.SUCCEEDED)
    producer.send("receipts", done)
    producer.flush()
    end = end_of(ledger_topics, key)
    first = Served(ledger_topics, tmp_path / "view")
    assert ViewClient(first.url).status(key, end, 10) == done
    positions = first.view.positions()
    first.close()

    again = Served(ledger_topics, tmp_path / "view")
    try:
        assert again.view.positions() == positions  # before reading anything
        assert ViewClient(again.url).status(key, end, 10) == done
    finally:
        again.close()


def _get(served: ServedView, path: str) -> tuple[int, Any]:
    """(HTTP status, JSON body) of GET ``path``, error statuses included."""
    try:
        with urllib.request.urlopen(served.url + path, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_bad_requests_say_what_is_wrong(served: ServedView) -> None:
    def get(path: str) -> tuple[int, Any]:
        return _get(served, path)

    assert get("/v1/operations/acme%2Frefund%2Fx?after=soon") == (
        400, {"error": "after must be an integer, got 'soon'"})
    assert get("/v1/operations/acme%2Frefund%2Fx?after=1&wait_ms=-1")[0] == 400
    assert get("/v1/operations/")[0] == 400
    assert get("/v2/nothing") == (404, {"error": "no such path: /v2/nothing"})
    status, health = get("/healthz")
    assert status == 200 and len(health["positions"]) == served.view.partitions


def test_client_status_asks_the_view(ledger_topics: Settings, served: ServedView) -> None:
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    done = receipt(key, "i1", ev.ReceiptStatus.SUCCEEDED)
    producer.send("receipts", done)
    producer.flush()
    settings = ledger_topics.model_copy(update={"view_url": served.url})
    with LedgerClient(settings) as client:
        assert client.status(key) == done  # written before the call: always seen
        later = receipt(key, "i2", ev.ReceiptStatus.REJECTED)
        producer.send("receipts", later)
        producer.flush()
        assert client.status(key) == later
        assert client.status(operation_key("acme", "refund", "none")) is None


def test_an_unreachable_view_is_a_typed_error(ledger_topics: Settings) -> None:
    settings = ledger_topics.model_copy(update={"view_url": "http://127.0.0.1:9"})
    with LedgerClient(settings) as client, pytest.raises(ViewUnavailableError):
        client.status(operation_key("acme", "refund", "x"))


def test_the_view_command_has_help_and_refuses_a_bad_flag(
        capsys: pytest.CaptureFixture[str]) -> None:
    from ledger_stream.cli.main import main

    with pytest.raises(SystemExit) as ok:
        main(["view", "--help"])
    assert ok.value.code == 0
    out = capsys.readouterr().out
    for flag, env in (("--port", "LEDGER_VIEW_PORT"), ("--host", "LEDGER_VIEW_HOST"),
                      ("--state-dir", "LEDGER_VIEW_STATE_DIR")):
        assert flag in out and env in out
    with pytest.raises(SystemExit) as bad:
        main(["view", "--port", "eighty"])
    assert bad.value.code == 2
    assert "invalid int value: 'eighty'" in capsys.readouterr().err


def test_the_view_command_names_a_missing_topic(ledger_settings: Settings, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from ledger_stream.cli.main import main

    assert ledger_settings.kafka_bootstrap
    code = main(["view", "--bootstrap", ledger_settings.kafka_bootstrap, "--topic-prefix",
                 f"missing-{uuid.uuid4().hex[:6]}", "--port", "0", "--state-dir",
                 str(tmp_path), "--no-auth"])
    assert code == 2
    assert "receipts is not available" in capsys.readouterr().err


def test_a_failed_store_makes_the_view_answer_503(served: ServedView, ledger_topics: Settings,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A view that cannot write must not go on answering from rows it no longer updates."""
    from ledger_stream.state.exceptions import StoreError

    def broken(rows: dict[bytes, bytes], positions: dict[int, int]) -> None:
        raise StoreError("disk full")

    monkeypatch.setattr(served.view._store, "apply", broken)
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    producer.send("receipts", receipt(key, "i1", ev.ReceiptStatus.ACCEPTED))
    producer.flush()
    with pytest.raises(ViewUnavailableError, match="503"):
        ViewClient(served.url).status(key, end_of(ledger_topics, key), 10)
    try:
        urllib.request.urlopen(served.url + "/healthz", timeout=10)
        raise AssertionError("healthz answered 200")
    except urllib.error.HTTPError as err:
        assert err.code == 503
        assert json.loads(err.read()) == {"error": "view failed: disk full"}


def test_an_offset_of_another_topic_or_partitioning_is_refused(served: ServedView) -> None:
    """Comparing the caller's offset with an unrelated partition's position would answer
    'caught up' with an old receipt."""
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    partition = partition_for(key, served.view.partitions)
    client = ViewClient(served.url)
    with pytest.raises(ViewUnavailableError, match="409.*partitions here, the caller counts 7"):
        client.status(key, 0, 1, partitions=7)
    with pytest.raises(ViewUnavailableError, match="409.*not other.receipts"):
        client.status(key, 0, 1, topic="other.receipts")
    with pytest.raises(ViewUnavailableError, match="409.*the caller says"):
        client.status(key, 0, 1, partition=(partition + 1) % served.view.partitions)
    assert client.status(key, 0, 1, topic=served.view.topic, partition=partition,
                         partitions=served.view.partitions) is None


def test_without_after_nothing_is_claimed_and_odd_parameters_are_refused(
        served: ServedView) -> None:
    def get(path: str) -> tuple[int, Any]:
        return _get(served, path)

    status, body = get("/v1/operations/acme%2Frefund%2Fx")
    assert status == 200 and body["caught_up"] is None
    assert get("/v1/operations/acme%2Frefund%2Fx?after=") == (
        400, {"error": "after must be an integer, got ''"})
    assert get("/v1/operations/acme%2Frefund%2F%FF")[0] == 400


def test_a_topic_created_again_is_read_afresh_not_answered_from_old_rows(
        ledger_topics: Settings, tmp_path: Path) -> None:
    """The receipts topic deleted and created again while the view was down: the old topic's
    rows and positions must not answer for the new one (the new topic's offsets start at 0,
    and can pass the stored position)."""
    from confluent_kafka.admin import AdminClient

    from ledger_stream.kafka import topics

    old_key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    producer.send("receipts", receipt(old_key, "i1", ev.ReceiptStatus.SUCCEEDED))
    producer.flush()
    first = Served(ledger_topics, tmp_path / "view")
    assert ViewClient(first.url).status(old_key, end_of(ledger_topics, old_key), 10) \
        is not None
    first.close()

    name = ledger_topics.topic("receipts")
    admin = AdminClient({"bootstrap.servers": ledger_topics.kafka_bootstrap})
    admin.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 30
    while name in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "the topic was not deleted"
        time.sleep(0.2)
    topics.require_matching(topics.create_topics(ledger_topics.kafka_bootstrap, ledger_topics))
    new_key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    fresh = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    done = receipt(new_key, "i2", ev.ReceiptStatus.SUCCEEDED)
    fresh.send("receipts", done)
    fresh.flush()

    again = Served(ledger_topics, tmp_path / "view")
    try:
        client = ViewClient(again.url)
        assert client.status(new_key, end_of(ledger_topics, new_key), 10) == done
        assert client.status(old_key, end_of(ledger_topics, old_key), 10) is None
    finally:
        again.close()


def test_a_timeline_behind_the_log_says_so_and_none_kept_is_a_clear_refusal(
        ledger_topics: Settings, tmp_path: Path) -> None:
    from ledger_stream.sdk.errors import NoTimelineError, StaleTimelineError
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    assert ledger_topics.kafka_bootstrap
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    producer.send("receipts", receipt(key, "i1", ev.ReceiptStatus.SUCCEEDED))
    producer.flush()
    stopped = ServedView(ledger_topics, tmp_path / "stopped", start=False)
    try:  # never reads: the record written before the request is not there yet
        with pytest.raises(StaleTimelineError, match="has not caught up"):
            ViewClient(stopped.url).history(key, "timeline", 0.3)
    finally:
        stopped.close()
    running = ServedView(ledger_topics, tmp_path / "running")
    try:
        body = ViewClient(running.url).history(key, "timeline", 10)
        assert [r["event"] for r in body["rows"]] == ["Receipt"] and body["caught_up"]
    finally:
        running.close()
    bare = ServedView(ledger_topics, tmp_path / "bare", timeline=False)
    try:
        with pytest.raises(NoTimelineError, match="keeps no timeline"):
            ViewClient(bare.url).history(key, "timeline", 1)
        # The SDK then reads the topics instead.
        settings = ledger_topics.model_copy(update={"view_url": bare.url})
        with LedgerClient(settings) as client:
            assert [r.event for r in client.timeline(key)] == ["Receipt"]
    finally:
        bare.close()
