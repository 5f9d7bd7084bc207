"""The freeze, unfreeze and watch commands refuse what they cannot do with one line, never a
traceback or a loop without pause (found by a hostile review, 2026-12-05): no Kafka
configured, a Kafka that does not answer, a wait or interval of NaN or infinity. No broker:
nothing here reaches one."""

from __future__ import annotations

import pytest

from ledger_stream.cli.main import main

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def no_kafka(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("LEDGER_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no `kafka up` state to find
    monkeypatch.chdir(tmp_path)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["freeze", "refund", "--reason", "x", "--wait", "0"],
    ["unfreeze", "refund", "--wait", "0"],
    ["watch", "sandbox", "--name", "sandbox", "--base-url", "http://127.0.0.1:1"],
])
def test_no_kafka_configured_is_one_line(argv: list[str], capsys) -> None:
    code, err = run(argv, capsys)
    assert code == 2 and err.startswith("ledger-stream: error: no Kafka"), err


def test_a_kafka_that_does_not_answer_is_one_line(capsys) -> None:
    code, err = run(["freeze", "refund", "--reason", "x", "--wait", "0",
                     "--bootstrap", "127.0.0.1:1"], capsys)
    assert code == 2 and "cannot reach Kafka at 127.0.0.1:1" in err, err


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_freeze_wait_that_never_ends_is_refused(value: str, capsys) -> None:
    code, err = run(["freeze", "refund", "--reason", "x", "--wait", value], capsys)
    assert code == 2 and "--wait must be between 0 and 3600" in err, err


@pytest.mark.parametrize("value", ["nan", "inf", "0", "1e300"])
def test_a_watch_interval_without_a_pause_or_past_a_day_is_refused(value: str, capsys) -> None:
    code, err = run(["watch", "sandbox", "--name", "s", "--base-url", "http://127.0.0.1:1",
                     "--interval", value], capsys)
    assert code == 2 and "--interval must be more than 0" in err, err


def test_a_freeze_the_processor_would_refuse_is_refused_before_it_is_sent(capsys) -> None:
    # Each partition's processor dead-letters a Containment with a field over 500
    # characters; the command reported it "in force" (found by the hostile review). Refused
    # here before Kafka is asked anything (the bootstrap does not answer).
    code, err = run(["freeze", "refund", "--reason", "x", "--operator", "o" * 501,
                     "--wait", "0", "--bootstrap", "127.0.0.1:1"], capsys)
    assert code == 2 and "operator longer than 500 characters" in err, err
