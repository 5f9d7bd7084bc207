"""``ledger-stream receipts KEY``: a key's receipts from its partition (or its latest from the
receipts view), as a table or JSON; a bad key or flag says what is wrong."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ledger_stream import operation_key
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.serde import AvroCodec
from ledger_stream.view import ReceiptView, ViewStore
from ledger_stream.view.server import make_server, serve_in_thread

pytestmark = pytest.mark.timeout(90)


def receipt(key: str, intent_id: str, status: ev.ReceiptStatus, at_ms: int) -> ev.Receipt:
    return ev.Receipt(receipt_id=uuid.uuid4().hex, key=key, intent_event_id=intent_id,
                      status=status, reason=ev.Reason.NONE, args_hash="h", attempts=1,
                      at_ms=at_ms, external_id="re_9" if status.value == "succeeded" else "",
                      key_status=status)


def common(s: Settings) -> list[str]:
    assert s.kafka_bootstrap
    return ["--bootstrap", s.kafka_bootstrap, "--topic-prefix", s.topic_prefix]


def test_every_receipt_then_only_the_latest(ledger_topics: Settings, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    producer = EventProducer(ledger_topics, ledger_topics.kafka_bootstrap, AvroCodec())
    first = receipt(key, "i1", ev.ReceiptStatus.ACCEPTED, 1_796_000_000_000)
    last = receipt(key, "i1", ev.ReceiptStatus.SUCCEEDED, 1_796_000_000_250)
    for r in (first, last):
        producer.send("receipts", r)
    producer.flush()

    assert main(["receipts", key, *common(ledger_topics)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t")[:3] == ["at", "status", "key_status"]
    assert [line.split("\t")[1] for line in lines[1:]] == ["accepted", "succeeded"]
    assert lines[2].split("\t")[0] == "2026-11-30T00:53:20.250Z"

    assert main(["receipts", key, "--json", *common(ledger_topics)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["receipt_id"] for r in rows] == [first.receipt_id, last.receipt_id]

    assert ledger_topics.kafka_bootstrap
    view = ReceiptView(ledger_topics.kafka_bootstrap, ledger_topics.topic("receipts"),
                       ViewStore(tmp_path / "view")).start()
    server = make_server(view, AvroCodec(), "127.0.0.1", 0, keys=None)
    serve_in_thread(server)
    try:
        assert main(["receipts", key, "--latest", "--json", "--view-url",
                     f"http://127.0.0.1:{server.server_port}", *common(ledger_topics)]) == 0
        assert [json.loads(x)["receipt_id"] for x in capsys.readouterr().out.splitlines()] \
            == [last.receipt_id]
    finally:
        server.shutdown()
        server.server_close()
        view.close()


def test_a_key_without_receipts_exits_1(ledger_topics: Settings,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
    assert main(["receipts", key, *common(ledger_topics)]) == 1
    assert capsys.readouterr().out == f"no receipt for {key}\n"


def test_a_malformed_key_and_a_bad_flag_say_what_is_wrong(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["receipts", "acme-refund"]) == 2
    assert "an operation key is tenant/action/business-id" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        main(["receipts", "acme/refund/x", "--lastest"])
    assert bad.value.code == 2
    assert "unrecognized arguments: --lastest" in capsys.readouterr().err
