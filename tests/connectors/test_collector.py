"""Who tunes Python's garbage collector for a connector: ``ledger-stream connector``, the
connector's own process, before it serves; never ``ConnectorWorker`` itself, which a
program (a test, an application embedding a connector) may run beside its own objects."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ledger_stream.cli import connector_cmd
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.connector import collector, runtime
from ledger_stream.connector.memory import MemoryTarget
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.serde import AvroCodec
from tests.connectors.fake_kafka import FakeConsumer, FakeProducer

DEFAULTS = (700, 10, 10)  # CPython's, as a process starts
TUNED = (collector.YOUNG, *collector.OLDER)


@pytest.fixture(autouse=True)
def collector_as_a_process_starts() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(*DEFAULTS)
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_the_connector_command_tunes_the_collector_before_it_serves(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, tuple[int, ...]]] = []

    class Worker:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            seen.append((gc.get_freeze_count(), gc.get_threshold()))

        def run(self, stop: threading.Event) -> int:
            seen.append((gc.get_freeze_count(), gc.get_threshold()))
            return 0

    monkeypatch.setattr(runtime, "ConnectorWorker", Worker)
    monkeypatch.setattr(connector_cmd, "build_target",
                        lambda *args: MemoryTarget("t", deduplicates=False))
    monkeypatch.setattr(connector_cmd, "_stop_on_signals", threading.Event)  # pytest's stay
    monkeypatch.setattr("ledger_stream.kafka.bootstrap.resolve_bootstrap", lambda s: "fake:9092")
    assert main(["connector", "http", "--base-url", "http://127.0.0.1:9",
                 "--metrics-port", "off"]) == 0
    built, serving = seen
    assert built == (0, DEFAULTS)  # start-up ran under the defaults
    assert serving[0] > 0 and serving[1] == TUNED


def test_a_worker_run_by_another_program_leaves_its_collector_alone() -> None:
    codec, made = AvroCodec(), []

    def consumer(config: dict[str, Any]) -> FakeConsumer:
        made.append(FakeConsumer(config, "gc.dispatch"))
        return made[-1]

    options = ConnectorOptions(instance_id="c", lease_ms=10_000, call_timeout_s=2.0,
                               record_margin_s=1.0, max_in_flight=4)
    worker = runtime.ConnectorWorker(Settings(kafka_bootstrap="fake:9092", topic_prefix="gc"),
                                     "fake:9092", MemoryTarget("t", deduplicates=False),
                                     options, codec, producer=FakeProducer(),  # type: ignore[arg-type]
                                     consumer=consumer)  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(target=worker.serve, args=(stop,), daemon=True)
    thread.start()
    try:
        for _ in range(50):
            if made and made[0].polls > 2:
                break
            stop.wait(0.05)
        assert made and made[0].polls > 2  # it served
    finally:
        stop.set()
        thread.join(15)
    assert not thread.is_alive()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == DEFAULTS
