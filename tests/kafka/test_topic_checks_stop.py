"""SIGTERM while the start-up check asks the cluster about the input topics' timestamp
configs, or sets the consumer group's session timeout: each request waits for an answer up
to 30 s (four tries for the configs), so a cluster whose topics listed but whose controller
then went away held the stop back for minutes. Told to stop, the processor ends at once with
status 0 and one line, as it does during the other start-up waits."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ledger_stream.config import Settings
from ledger_stream.kafka.layout import Layout
from ledger_stream.processor import preflight, runtime
from tests.processor.start_up_stop import assert_a_stop_ends_the_start_up

NOWHERE = "127.0.0.1:1"  # no broker ever answers: each admin request waits its whole bound


def _topics_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The topics are listed and the layout is read (a cluster whose controller then went
    away): what follows asks a cluster that never answers."""
    monkeypatch.setattr(runtime, "wait_for_kafka", lambda *_a, **_kw: True)

    def listed(_admin: object, names: list[str], *_a: object, **_kw: object
               ) -> tuple[dict[str, object], list[str]]:
        return {name: SimpleNamespace(partitions={0: None, 1: None}) for name in names}, []
    monkeypatch.setattr(preflight, "listed_topics", listed)
    monkeypatch.setattr(preflight, "check_layout", lambda *_a, **_kw: Layout(2))


@pytest.mark.parametrize("step", ["describe the input topics", "configure the group"])
def test_sigterm_during_the_topic_checks_ends_the_start_up(
        step: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    _topics_listed(monkeypatch)
    settings = Settings(kafka_bootstrap=NOWHERE, state_dir=tmp_path / "state",
                        group_protocol="consumer")
    if step == "configure the group":  # the configs were read: the group's set-up waits
        monkeypatch.setattr(preflight, "_describe", lambda *_a, **_kw: {
            "message.timestamp.type": "LogAppendTime"})
    # Before: stuck in the admin request for 30 s or more.
    assert_a_stop_ends_the_start_up(settings, caplog, step, within_s=2.5)
